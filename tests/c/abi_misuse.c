/*
 * abi_misuse — the FFI misuse matrix of the qwen-companion C ABI, from C.
 *
 * Every fallible call is checked for its status, and for the error-string
 * contract: on failure *error is an owned, non-empty UTF-8 string (freed
 * here with qc_string_free, so ASan/LSan catch ownership mistakes), on
 * success *error is set to NULL. Build under ASan+UBSan and run: it must
 * print "abi-misuse: N passed, 0 failed" and exit 0.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qwen_companion.h"

static int passed, failed;

#define CHECK(cond, ...)                                                            \
    do {                                                                            \
        if (cond) {                                                                 \
            passed++;                                                               \
        } else {                                                                    \
            failed++;                                                               \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);         \
            fprintf(stderr, __VA_ARGS__);                                           \
            fputc('\n', stderr);                                                    \
        }                                                                           \
    } while (0)

/* A non-NULL value the library must overwrite on success. */
static char sentinel_byte;
#define SENTINEL (&sentinel_byte)

static int valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 1 : (*p & 0xE0) == 0xC0 ? 2 : (*p & 0xF0) == 0xE0 ? 3 : (*p & 0xF8) == 0xF0 ? 4 : 0;
        int i;
        if (n == 0)
            return 0;
        for (i = 1; i < n; i++)
            if ((p[i] & 0xC0) != 0x80)
                return 0;
        p += n;
    }
    return 1;
}

/*
 * Check one call: its status is `want` (or `want2`, when the contract allows
 * two answers; pass want again otherwise) and its error string follows the
 * contract. Frees the error string.
 */
static void expect2(int line, const char *what, qc_status got, qc_status want, qc_status want2, char *err)
{
    int ok_status = got == want || got == want2;
    if (ok_status)
        passed++;
    else {
        failed++;
        fprintf(stderr, "FAIL line %d: %s: got %s (%u), want %s%s%s; error: %s\n", line, what,
                qc_status_name(got), (unsigned)got, qc_status_name(want), want2 != want ? " or " : "",
                want2 != want ? qc_status_name(want2) : "",
                err == NULL ? "NULL" : err == SENTINEL ? "(not set)" : err);
    }
    if (got == QC_OK) {
        CHECK(err == NULL, "line %d: %s: *error not set to NULL on success", line, what);
    } else {
        CHECK(err != NULL && err != SENTINEL, "line %d: %s: no error string on failure", line, what);
        if (err != NULL && err != SENTINEL) {
            CHECK(err[0] != '\0', "line %d: %s: empty error string", line, what);
            CHECK(valid_utf8(err), "line %d: %s: error string is not UTF-8", line, what);
        }
    }
    if (err != SENTINEL)
        qc_string_free(err);
}

/* `call` must use `&err_` as its error argument. */
#define EXPECT(what, call, want)                                                    \
    do {                                                                            \
        char *err_ = SENTINEL;                                                      \
        qc_status st_ = (call);                                                     \
        expect2(__LINE__, what, st_, want, want, err_);                             \
    } while (0)
/* A NULL handle is both a NULL argument and an invalid handle: the contract
 * names no single status for it, so either is accepted. */
#define EXPECT_ANY(what, call, want, want2)                                         \
    do {                                                                            \
        char *err_ = SENTINEL;                                                      \
        qc_status st_ = (call);                                                     \
        expect2(__LINE__, what, st_, want, want2, err_);                            \
    } while (0)

static int file_exists(const char *path)
{
    struct stat st;
    return path != NULL && stat(path, &st) == 0;
}

static int free_calls;
static void count_free(void *user_data)
{
    (void)user_data;
    free_calls++;
}
static void log_cb(void *user_data, uint32_t level, const char *message)
{
    (void)user_data;
    if (level <= 2)
        fprintf(stderr, "  [lib level %u] %s\n", (unsigned)level, message != NULL ? message : "(null)");
}
static int32_t open_diff_cb(void *user_data, const char *path, const char *content, size_t len, qc_reply *reply)
{
    (void)user_data;
    (void)path;
    (void)content;
    (void)len;
    (void)reply;
    return 0;
}
static int32_t close_diff_cb(void *user_data, const char *path, qc_reply *reply)
{
    (void)user_data;
    (void)path;
    (void)reply;
    return 0;
}

static void test_static(void)
{
    const char *v = qc_version();
    struct {
        qc_status status;
        const char *name;
    } names[] = {
        {QC_OK, "QC_OK"},
        {QC_NULL_PARAMETER, "QC_NULL_PARAMETER"},
        {QC_INVALID_UTF8, "QC_INVALID_UTF8"},
        {QC_INVALID_JSON, "QC_INVALID_JSON"},
        {QC_INVALID_ARGUMENT, "QC_INVALID_ARGUMENT"},
        {QC_INVALID_HANDLE, "QC_INVALID_HANDLE"},
        {QC_NOT_RUNNING, "QC_NOT_RUNNING"},
        {QC_ALREADY_RUNNING, "QC_ALREADY_RUNNING"},
        {QC_NOT_FOUND, "QC_NOT_FOUND"},
        {QC_IO, "QC_IO"},
        {QC_PANIC, "QC_PANIC"},
        {QC_INTERNAL, "QC_INTERNAL"},
        {QC_REFUSED, "QC_REFUSED"},
    };
    size_t i;

    CHECK(qc_abi_version() == QC_ABI_VERSION, "qc_abi_version() = %u, QC_ABI_VERSION = %u",
          (unsigned)qc_abi_version(), (unsigned)QC_ABI_VERSION);
    CHECK(QC_ABI_VERSION == 1, "QC_ABI_VERSION = %u", (unsigned)QC_ABI_VERSION);
    CHECK(v != NULL && v[0] >= '0' && v[0] <= '9' && strchr(v, '.') != NULL, "qc_version() = %s",
          v != NULL ? v : "NULL");
    CHECK(v == qc_version(), "qc_version() is not a static string");

    /* the fixed, never-reused status table */
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *n = qc_status_name(names[i].status);
        CHECK(names[i].status == (qc_status)i, "%s = %u, want %u", names[i].name,
              (unsigned)names[i].status, (unsigned)i);
        CHECK(n != NULL && strcmp(n, names[i].name) == 0, "qc_status_name(%u) = %s, want %s",
              (unsigned)names[i].status, n != NULL ? n : "NULL", names[i].name);
    }
    CHECK(qc_status_name(13) != NULL && qc_status_name(0xFFFFFFFFu) != NULL,
          "qc_status_name(unknown) returned NULL");
    CHECK(strcmp(qc_status_name(0xFFFFFFFFu), "QC_OK") != 0, "qc_status_name(unknown) = QC_OK");
}

static void test_null_frees(void)
{
    qc_string_free(NULL);
    passed++;
    CHECK(qc_companion_free(NULL) == QC_OK, "qc_companion_free(NULL) = %s",
          qc_status_name(qc_companion_free(NULL)));
}

static void test_new_errors(const char *lockdir_json)
{
    qc_companion *c = NULL;
    char cfg[512];

    EXPECT("new(out=NULL)", qc_companion_new(NULL, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT("new(config, out=NULL)", qc_companion_new("{}", NULL, &err_), QC_NULL_PARAMETER);

    EXPECT("new(malformed JSON)", qc_companion_new("{\"workspaceRoots\": [", &c, &err_), QC_INVALID_JSON);
    CHECK(c == NULL, "out written on failure");
    EXPECT("new(not JSON)", qc_companion_new("hello", &c, &err_), QC_INVALID_JSON);
    CHECK(c == NULL, "out written on failure");
    EXPECT("new(invalid UTF-8)", qc_companion_new("{\"ideName\":\"\xff\xfe\"}", &c, &err_), QC_INVALID_UTF8);
    CHECK(c == NULL, "out written on failure");
    EXPECT_ANY("new(JSON array)", qc_companion_new("[1,2]", &c, &err_), QC_INVALID_JSON, QC_INVALID_ARGUMENT);
    CHECK(c == NULL, "out written on failure");
    EXPECT_ANY("new(workspaceRoots not an array)", qc_companion_new("{\"workspaceRoots\":\"/a\"}", &c, &err_),
               QC_INVALID_JSON, QC_INVALID_ARGUMENT);
    CHECK(c == NULL, "out written on failure");

    /* error == NULL is allowed on failure paths */
    CHECK(qc_companion_new("{", &c, NULL) == QC_INVALID_JSON, "new(malformed, error=NULL)");
    CHECK(qc_companion_new(NULL, NULL, NULL) == QC_NULL_PARAMETER, "new(out=NULL, error=NULL)");
    CHECK(c == NULL, "out written on failure");

    /* NULL config = defaults; create and free without starting */
    EXPECT("new(NULL config)", qc_companion_new(NULL, &c, &err_), QC_OK);
    CHECK(c != NULL, "new(NULL config) gave no handle");
    EXPECT("free(never started)", (err_ = NULL, qc_companion_free(c)), QC_OK);
    c = NULL;

    /* error == NULL on success */
    snprintf(cfg, sizeof cfg, "{%s}", lockdir_json);
    CHECK(qc_companion_new(cfg, &c, NULL) == QC_OK && c != NULL, "new(config, error=NULL)");
    CHECK(qc_companion_free(c) == QC_OK, "free");
}

static void test_lifecycle(const char *lockdir, const char *lockdir_json, const char *ws)
{
    qc_companion *c = NULL, *c2 = NULL;
    uint16_t port = 0, port2 = 0;
    char cfg[2048], file[1024], bad_path[64];
    char *lock = NULL, *lock2 = NULL, *s = NULL;
    int not_a_handle = 42;
    qc_companion *garbage[3];
    size_t i;

    snprintf(cfg, sizeof cfg, "{\"workspaceRoots\":[\"%s\"],\"ideName\":\"abi-test\",%s,\"ppid\":%ld}", ws,
             lockdir_json, (long)getpid());
    snprintf(file, sizeof file, "%s/main.c", ws);
    {
        /* the context only lists files that exist on disk */
        FILE *f = fopen(file, "w");
        CHECK(f != NULL, "cannot create %s", file);
        if (f != NULL)
            fclose(f);
    }
    snprintf(bad_path, sizeof bad_path, "/tmp/bad-\xc3\x28-utf8.c"); /* invalid 2-byte sequence */

    EXPECT("new(valid config)", qc_companion_new(cfg, &c, &err_), QC_OK);
    CHECK(c != NULL, "no handle");
    if (c == NULL)
        return;

    /* not running yet */
    EXPECT("port before start", qc_companion_port(c, &port, &err_), QC_NOT_RUNNING);
    EXPECT("stop before start", qc_companion_stop(c, &err_), QC_NOT_RUNNING);

    /* NULL handles and arguments */
    EXPECT_ANY("start(NULL)", qc_companion_start(NULL, &err_), QC_NULL_PARAMETER, QC_INVALID_HANDLE);
    EXPECT_ANY("stop(NULL)", qc_companion_stop(NULL, &err_), QC_NULL_PARAMETER, QC_INVALID_HANDLE);
    EXPECT_ANY("port(NULL handle)", qc_companion_port(NULL, &port, &err_), QC_NULL_PARAMETER, QC_INVALID_HANDLE);

    /* callbacks, with free_user_data accounting */
    free_calls = 0;
    EXPECT_ANY("set_log_callback(NULL handle)", qc_companion_set_log_callback(NULL, log_cb, NULL, NULL, 3, &err_),
           QC_NULL_PARAMETER, QC_INVALID_HANDLE);
    EXPECT("set_log_callback", qc_companion_set_log_callback(c, log_cb, &free_calls, count_free, 3, &err_), QC_OK);
    EXPECT("set_log_callback(replace)",
           qc_companion_set_log_callback(c, log_cb, &free_calls, count_free, 3, &err_), QC_OK);
    CHECK(free_calls == 1, "replacing the log callback freed user data %d times, want 1", free_calls);
    EXPECT("set_open_diff_callback", qc_companion_set_open_diff_callback(c, open_diff_cb, &free_calls, count_free, &err_),
           QC_OK);
    EXPECT("set_close_diff_callback",
           qc_companion_set_close_diff_callback(c, close_diff_cb, &free_calls, count_free, &err_), QC_OK);
    EXPECT_ANY("set_open_diff_callback(NULL handle)",
           qc_companion_set_open_diff_callback(NULL, open_diff_cb, NULL, NULL, &err_), QC_NULL_PARAMETER, QC_INVALID_HANDLE);
    EXPECT_ANY("set_close_diff_callback(NULL handle)",
           qc_companion_set_close_diff_callback(NULL, close_diff_cb, NULL, NULL, &err_), QC_NULL_PARAMETER, QC_INVALID_HANDLE);
    EXPECT("reply_set_text(NULL reply)", qc_reply_set_text(NULL, "x", 1, &err_), QC_NULL_PARAMETER);

    /* start */
    EXPECT("start", qc_companion_start(c, &err_), QC_OK);
    EXPECT("start again", qc_companion_start(c, &err_), QC_ALREADY_RUNNING);

    EXPECT("port(out=NULL)", qc_companion_port(c, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT("port", qc_companion_port(c, &port, &err_), QC_OK);
    CHECK(port > 0, "port = 0");

    EXPECT("lock_file_path(out=NULL)", qc_companion_lock_file_path(c, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT_ANY("lock_file_path(NULL handle)", qc_companion_lock_file_path(NULL, &lock, &err_), QC_NULL_PARAMETER, QC_INVALID_HANDLE);
    EXPECT("lock_file_path", qc_companion_lock_file_path(c, &lock, &err_), QC_OK);
    CHECK(lock != NULL && strncmp(lock, lockdir, strlen(lockdir)) == 0, "lock file %s not under %s",
          lock != NULL ? lock : "NULL", lockdir);
    CHECK(file_exists(lock), "lock file %s does not exist while running", lock != NULL ? lock : "NULL");

    EXPECT("terminal_env_json(out=NULL)", qc_companion_terminal_env_json(c, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT("terminal_env_json", qc_companion_terminal_env_json(c, &s, &err_), QC_OK);
    {
        char want[64];
        snprintf(want, sizeof want, "\"QWEN_CODE_IDE_SERVER_PORT\":\"%u\"", (unsigned)port);
        CHECK(s != NULL && strstr(s, want) != NULL, "env %s lacks %s", s != NULL ? s : "NULL", want);
        CHECK(s != NULL && strstr(s, ws) != NULL, "env %s lacks workspace %s", s != NULL ? s : "NULL", ws);
    }
    qc_string_free(s);
    s = NULL;

    /* editor events: NULL handle / NULL path / invalid UTF-8 / valid */
    EXPECT_ANY("file_opened(NULL handle)", qc_companion_file_opened(NULL, file, &err_), QC_NULL_PARAMETER, QC_INVALID_HANDLE);
    EXPECT("file_opened(NULL path)", qc_companion_file_opened(c, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT("file_opened(invalid UTF-8)", qc_companion_file_opened(c, bad_path, &err_), QC_INVALID_UTF8);
    EXPECT("file_opened", qc_companion_file_opened(c, file, &err_), QC_OK);
    EXPECT("file_focused(NULL path)", qc_companion_file_focused(c, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT("file_focused(invalid UTF-8)", qc_companion_file_focused(c, bad_path, &err_), QC_INVALID_UTF8);
    EXPECT("file_focused", qc_companion_file_focused(c, file, &err_), QC_OK);
    EXPECT("file_closed(NULL path)", qc_companion_file_closed(c, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT("file_closed(invalid UTF-8)", qc_companion_file_closed(c, bad_path, &err_), QC_INVALID_UTF8);
    EXPECT("file_renamed(new NULL)", qc_companion_file_renamed(c, file, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT("file_renamed(old NULL)", qc_companion_file_renamed(c, NULL, file, &err_), QC_NULL_PARAMETER);
    EXPECT("file_renamed(invalid UTF-8)", qc_companion_file_renamed(c, file, bad_path, &err_), QC_INVALID_UTF8);

    EXPECT("set_cursor(0,0)", qc_companion_set_cursor(c, NULL, 0, 0, &err_), QC_INVALID_ARGUMENT);
    EXPECT("set_cursor(invalid UTF-8 path)", qc_companion_set_cursor(c, bad_path, 1, 1, &err_), QC_INVALID_UTF8);
    EXPECT_ANY("set_cursor(NULL handle)", qc_companion_set_cursor(NULL, NULL, 1, 1, &err_), QC_NULL_PARAMETER, QC_INVALID_HANDLE);
    EXPECT("set_cursor", qc_companion_set_cursor(c, NULL, 3, 7, &err_), QC_OK);

    EXPECT("set_selection(invalid UTF-8)", qc_companion_set_selection(c, NULL, "a\xff" "b", 3, &err_), QC_INVALID_UTF8);
    EXPECT("set_selection", qc_companion_set_selection(c, NULL, "sel\ntext", 8, &err_), QC_OK);
    EXPECT("set_selection(NULL = none)", qc_companion_set_selection(c, NULL, NULL, 0, &err_), QC_OK);

    EXPECT_ANY("set_trusted(NULL handle)", qc_companion_set_trusted(NULL, 1, &err_), QC_NULL_PARAMETER, QC_INVALID_HANDLE);
    EXPECT("set_trusted", qc_companion_set_trusted(c, 1, &err_), QC_OK);

    EXPECT("set_context_json(NULL)", qc_companion_set_context_json(c, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT("set_context_json(malformed)", qc_companion_set_context_json(c, "{\"workspaceState\":", &err_),
           QC_INVALID_JSON);
    EXPECT("set_context_json(invalid UTF-8)", qc_companion_set_context_json(c, "{\"x\":\"\xff\"}", &err_),
           QC_INVALID_UTF8);
    {
        char ctx[1200];
        snprintf(ctx, sizeof ctx,
                 "{\"workspaceState\":{\"openFiles\":[{\"path\":\"%s\",\"timestamp\":1,\"isActive\":true,"
                 "\"cursor\":{\"line\":2,\"character\":4}}],\"isTrusted\":true}}",
                 file);
        EXPECT("set_context_json", qc_companion_set_context_json(c, ctx, &err_), QC_OK);
    }
    EXPECT("context_json(out=NULL)", qc_companion_context_json(c, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT("context_json", qc_companion_context_json(c, &s, &err_), QC_OK);
    CHECK(s != NULL && strstr(s, file) != NULL, "context %s lacks %s", s != NULL ? s : "NULL", file);
    qc_string_free(s);
    s = NULL;

    EXPECT("set_workspace_roots_json(NULL)", qc_companion_set_workspace_roots_json(c, NULL, &err_),
           QC_NULL_PARAMETER);
    EXPECT("set_workspace_roots_json(malformed)", qc_companion_set_workspace_roots_json(c, "[\"/a\"", &err_),
           QC_INVALID_JSON);
    EXPECT("set_workspace_roots_json(invalid UTF-8)",
           qc_companion_set_workspace_roots_json(c, "[\"/\xc3\x28\"]", &err_), QC_INVALID_UTF8);
    {
        char roots[1100];
        snprintf(roots, sizeof roots, "[\"%s\"]", ws);
        EXPECT("set_workspace_roots_json", qc_companion_set_workspace_roots_json(c, roots, &err_), QC_OK);
    }

    /* diff decisions for diffs that were never opened */
    EXPECT("diff_accept(unknown)", qc_companion_diff_accept(c, file, NULL, 0, &err_), QC_NOT_FOUND);
    EXPECT("diff_accept(unknown, content)", qc_companion_diff_accept(c, file, "x", 1, &err_), QC_NOT_FOUND);
    EXPECT("diff_reject(unknown)", qc_companion_diff_reject(c, file, &err_), QC_NOT_FOUND);
    EXPECT("diff_closed(unknown)", qc_companion_diff_closed(c, file, &err_), QC_NOT_FOUND);
    EXPECT("diff_accept(NULL path)", qc_companion_diff_accept(c, NULL, NULL, 0, &err_), QC_NULL_PARAMETER);
    EXPECT("diff_accept(invalid UTF-8)", qc_companion_diff_accept(c, bad_path, NULL, 0, &err_), QC_INVALID_UTF8);
    EXPECT("diff_reject(NULL path)", qc_companion_diff_reject(c, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT("diff_closed(NULL path)", qc_companion_diff_closed(c, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT_ANY("diff_accept(NULL handle)", qc_companion_diff_accept(NULL, file, NULL, 0, &err_), QC_NULL_PARAMETER, QC_INVALID_HANDLE);

    /* a second companion runs side by side; freeing it while running stops it */
    EXPECT("new(second)", qc_companion_new(cfg, &c2, &err_), QC_OK);
    if (c2 != NULL) {
        EXPECT("start(second)", qc_companion_start(c2, &err_), QC_OK);
        EXPECT("port(second)", qc_companion_port(c2, &port2, &err_), QC_OK);
        CHECK(port2 != 0 && port2 != port, "second port %u vs first %u", (unsigned)port2, (unsigned)port);
        EXPECT("lock_file_path(second)", qc_companion_lock_file_path(c2, &lock2, &err_), QC_OK);
        CHECK(lock2 != NULL && lock != NULL && strcmp(lock, lock2) != 0 && file_exists(lock2),
              "second lock file %s", lock2 != NULL ? lock2 : "NULL");
        EXPECT("free(second, running)", (err_ = NULL, qc_companion_free(c2)), QC_OK);
        CHECK(!file_exists(lock2), "lock file %s survives free of a running companion", lock2 != NULL ? lock2 : "NULL");
        CHECK(file_exists(lock), "freeing the second companion removed the first lock file");
        qc_string_free(lock2);
    }

    /* stop, double stop */
    EXPECT("stop", qc_companion_stop(c, &err_), QC_OK);
    CHECK(!file_exists(lock), "lock file %s survives stop", lock != NULL ? lock : "NULL");
    EXPECT("stop again", qc_companion_stop(c, &err_), QC_NOT_RUNNING);
    EXPECT("port after stop", qc_companion_port(c, &port, &err_), QC_NOT_RUNNING);
    CHECK(qc_companion_stop(c, NULL) == QC_NOT_RUNNING, "stop again, error=NULL");

    /* free; the handle is now stale */
    CHECK(qc_companion_free(c) == QC_OK, "free");
    CHECK(free_calls == 4, "after free, user data freed %d times, want 4 (log x2, open diff, close diff)",
          free_calls);
    EXPECT("start(freed)", qc_companion_start(c, &err_), QC_INVALID_HANDLE);
    EXPECT("stop(freed)", qc_companion_stop(c, &err_), QC_INVALID_HANDLE);
    EXPECT("port(freed)", qc_companion_port(c, &port, &err_), QC_INVALID_HANDLE);
    EXPECT("file_opened(freed)", qc_companion_file_opened(c, file, &err_), QC_INVALID_HANDLE);
    EXPECT("context_json(freed)", qc_companion_context_json(c, &s, &err_), QC_INVALID_HANDLE);
    EXPECT("set_log_callback(freed)", qc_companion_set_log_callback(c, log_cb, NULL, NULL, 3, &err_),
           QC_INVALID_HANDLE);
    EXPECT("diff_accept(freed)", qc_companion_diff_accept(c, file, NULL, 0, &err_), QC_INVALID_HANDLE);
    CHECK(qc_companion_free(c) == QC_INVALID_HANDLE, "double free = %s", qc_status_name(qc_companion_free(c)));
    CHECK(s == NULL, "out written on failure");

    /* garbage handles: never dereferenced */
    garbage[0] = (qc_companion *)(uintptr_t)0x10;
    garbage[1] = (qc_companion *)(void *)&not_a_handle;
    garbage[2] = (qc_companion *)(uintptr_t)UINTPTR_MAX;
    for (i = 0; i < sizeof garbage / sizeof garbage[0]; i++) {
        EXPECT("start(garbage)", qc_companion_start(garbage[i], &err_), QC_INVALID_HANDLE);
        EXPECT("port(garbage)", qc_companion_port(garbage[i], &port, &err_), QC_INVALID_HANDLE);
        EXPECT("set_cursor(garbage)", qc_companion_set_cursor(garbage[i], NULL, 1, 1, &err_), QC_INVALID_HANDLE);
        CHECK(qc_companion_free(garbage[i]) == QC_INVALID_HANDLE, "free(garbage %zu)", i);
    }
    qc_string_free(lock);
}

static void test_start_io_error(void)
{
    qc_companion *c = NULL;
    /* a lock directory that cannot be created */
    EXPECT("new(unusable lockDir)", qc_companion_new("{\"lockDir\":\"/proc/qc-abi-test/ide\"}", &c, &err_), QC_OK);
    if (c != NULL) {
        EXPECT("start(unusable lockDir)", qc_companion_start(c, &err_), QC_IO);
        EXPECT("port after failed start", qc_companion_port(c, &(uint16_t){0}, &err_), QC_NOT_RUNNING);
        CHECK(qc_companion_free(c) == QC_OK, "free");
    }
}

/* ---- qc_plugin_host_*: every function x {NULL, freed, companion handle},
 * NULL required arguments, invalid UTF-8, invalid JSON; error_json is NULL
 * on handle and argument errors and an owned JSON object on host errors. */

static void json_cb(void *user_data, const char *json)
{
    (void)user_data;
    (void)json;
}
static void cap_cb(void *user_data, uint64_t id, const char *json)
{
    (void)user_data;
    (void)id;
    (void)json;
}

/* `call` must use `&err_` as its error argument and `&ej_` as error_json;
 * the error_json must come back NULL (an argument or handle error). */
#define EXPECT_NOJ(what, call, want, want2)                                          \
    do {                                                                            \
        char *err_ = SENTINEL, *ej_ = SENTINEL;                                     \
        qc_status st_ = (call);                                                     \
        expect2(__LINE__, what, st_, want, want2, err_);                            \
        CHECK(ej_ == NULL, "line %d: %s: error_json not NULL", __LINE__, what);     \
        if (ej_ != NULL && ej_ != SENTINEL)                                         \
            qc_string_free(ej_);                                                    \
    } while (0)

/* Every function of the plugin host against handle h, which is not a live
 * plugin host: each must answer QC_INVALID_HANDLE (or, for NULL,
 * QC_NULL_PARAMETER), write no out-parameter and leave error_json NULL. */
static void plugin_bad_handle(qc_plugin_host *h, const char *kind, qc_status want2)
{
    char *out = NULL;
    int32_t vis = -1, fd = -1;
    char what[128];
    const uint8_t data[1] = {'x'};

#define W(name) (snprintf(what, sizeof what, "%s(%s)", name, kind), what)
    EXPECT_ANY(W("reload"), qc_plugin_host_reload(h, &err_), QC_INVALID_HANDLE, want2);
    EXPECT_ANY(W("plugins_dir"), qc_plugin_host_plugins_dir(h, &out, &err_), QC_INVALID_HANDLE, want2);
    EXPECT_ANY(W("startup_finished"), qc_plugin_host_startup_finished(h, &out, &err_), QC_INVALID_HANDLE, want2);
    EXPECT_NOJ(W("unload"), qc_plugin_host_unload(h, "a.b", &ej_, &err_), QC_INVALID_HANDLE, want2);
    EXPECT_ANY(W("enable"), qc_plugin_host_enable(h, "a.b", &err_), QC_INVALID_HANDLE, want2);
    EXPECT_ANY(W("disable"), qc_plugin_host_disable(h, "a.b", &err_), QC_INVALID_HANDLE, want2);
    EXPECT_ANY(W("set_config_value"), qc_plugin_host_set_config_value(h, "a.b", "k", "1", &err_),
               QC_INVALID_HANDLE, want2);
    EXPECT_NOJ(W("install"), qc_plugin_host_install(h, "/tmp", &out, &ej_, &err_), QC_INVALID_HANDLE, want2);
    EXPECT_NOJ(W("uninstall"), qc_plugin_host_uninstall(h, "a.b", 0, &out, &ej_, &err_), QC_INVALID_HANDLE, want2);
    EXPECT_NOJ(W("list"), qc_plugin_host_list(h, &out, &ej_, &err_), QC_INVALID_HANDLE, want2);
    EXPECT_NOJ(W("call"), qc_plugin_host_call(h, "a.b", "t", "{}", NULL, &out, &ej_, &err_), QC_INVALID_HANDLE, want2);
    free_calls = 0;
    EXPECT_ANY(W("call_async"),
               qc_plugin_host_call_async(h, "a.b", "t", "{}", NULL, json_cb, &free_calls, count_free, &err_),
               QC_INVALID_HANDLE, want2);
    CHECK(free_calls == 0, "%s: user_data taken on failure", what);
    EXPECT_NOJ(W("visible"), qc_plugin_host_visible(h, "a.b", "/", &vis, &ej_, &err_), QC_INVALID_HANDLE, want2);
    EXPECT_NOJ(W("options"), qc_plugin_host_options(h, "a.b", "mode", &out, &ej_, &err_), QC_INVALID_HANDLE, want2);
    EXPECT_NOJ(W("parse_document"), qc_plugin_host_parse_document(h, "text/plain", data, 1, &out, &ej_, &err_),
               QC_INVALID_HANDLE, want2);
    EXPECT_ANY(W("set_event_callback"), qc_plugin_host_set_event_callback(h, json_cb, &free_calls, count_free, &err_),
               QC_INVALID_HANDLE, want2);
    EXPECT_ANY(W("set_log_callback"), qc_plugin_host_set_log_callback(h, log_cb, &free_calls, count_free, 3, &err_),
               QC_INVALID_HANDLE, want2);
    EXPECT_ANY(W("set_capability_callback"),
               qc_plugin_host_set_capability_callback(h, "show_notification", cap_cb, &free_calls, count_free, &err_),
               QC_INVALID_HANDLE, want2);
    CHECK(free_calls == 0, "%s: user_data taken on failure (%d)", kind, free_calls);
    EXPECT_ANY(W("offer_capability"), qc_plugin_host_offer_capability(h, "x", &err_), QC_INVALID_HANDLE, want2);
    EXPECT_ANY(W("respond"), qc_plugin_host_respond(h, 1, "{}", NULL, &err_), QC_INVALID_HANDLE, want2);
    EXPECT_ANY(W("enable_events"), qc_plugin_host_enable_events(h, &fd, &err_), QC_INVALID_HANDLE, want2);
    EXPECT_ANY(W("next_event"), qc_plugin_host_next_event(h, &out, &err_), QC_INVALID_HANDLE, want2);
    EXPECT_ANY(W("stats"), qc_plugin_host_stats(h, "a.b", &out, &err_), QC_INVALID_HANDLE, want2);
    EXPECT_ANY(W("mcp_start"), qc_plugin_host_mcp_start(h, NULL, &err_), QC_INVALID_HANDLE, want2);
    EXPECT_ANY(W("mcp_stop"), qc_plugin_host_mcp_stop(h, &err_), QC_INVALID_HANDLE, want2);
    EXPECT_ANY(W("mcp_info"), qc_plugin_host_mcp_info(h, &out, &err_), QC_INVALID_HANDLE, want2);
    EXPECT_ANY(W("views_start"), qc_plugin_host_views_start(h, NULL, &out, &err_), QC_INVALID_HANDLE, want2);
    EXPECT_ANY(W("views_stop"), qc_plugin_host_views_stop(h, &err_), QC_INVALID_HANDLE, want2);
    EXPECT_ANY(W("views_json"), qc_plugin_host_views_json(h, &out, &err_), QC_INVALID_HANDLE, want2);
    EXPECT_ANY(W("view_url"), qc_plugin_host_view_url(h, "a.b", NULL, &out, &err_), QC_INVALID_HANDLE, want2);
    EXPECT_ANY(W("set_color_scheme"), qc_plugin_host_set_color_scheme(h, "dark", &err_), QC_INVALID_HANDLE, want2);
#undef W
    CHECK(out == NULL && vis == -1 && fd == -1, "%s: out-parameter written on failure", kind);
}

static void test_plugin_host(const char *base)
{
    qc_plugin_host *h = NULL, *freed = NULL;
    qc_companion *c = NULL;
    char cfg[600], *out = NULL, *ej = NULL, *err = NULL;
    const char *bad = "a\xff" "b";      /* invalid UTF-8 */
    const char *badjson = "{\"a\":";    /* invalid JSON */
    int32_t vis = -1, fd = -1;
    const uint8_t data[3] = {'a', 'b', 'c'};

    snprintf(cfg, sizeof cfg, "{\"pluginsDir\":\"%s/plugins\",\"hostRequestTimeoutMs\":500}", base);

    /* new */
    EXPECT("plugin_host_new(out=NULL)", qc_plugin_host_new(cfg, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT("plugin_host_new(invalid JSON)", qc_plugin_host_new(badjson, &h, &err_), QC_INVALID_JSON);
    EXPECT("plugin_host_new(unknown field)", qc_plugin_host_new("{\"pluginDir\":\"/x\"}", &h, &err_), QC_INVALID_JSON);
    EXPECT("plugin_host_new(invalid UTF-8)", qc_plugin_host_new("{\"node\":\"\xff\"}", &h, &err_), QC_INVALID_UTF8);
    EXPECT("plugin_host_new(out of range)", qc_plugin_host_new("{\"callTimeoutMs\":1}", &h, &err_),
           QC_INVALID_ARGUMENT);
    CHECK(h == NULL, "plugin_host_new wrote out on failure");
    CHECK(qc_plugin_host_free(NULL) == QC_OK, "plugin_host_free(NULL)");

    /* bad handles: NULL, freed, a companion's */
    EXPECT("plugin_host_new(to free)", qc_plugin_host_new(cfg, &freed, &err_), QC_OK);
    CHECK(qc_plugin_host_free(freed) == QC_OK, "plugin_host_free");
    CHECK(qc_plugin_host_free(freed) == QC_INVALID_HANDLE, "plugin_host_free twice");
    EXPECT("companion_new", qc_companion_new(NULL, &c, &err_), QC_OK);
    plugin_bad_handle(NULL, "NULL", QC_NULL_PARAMETER);
    plugin_bad_handle(freed, "freed", QC_INVALID_HANDLE);
    plugin_bad_handle((qc_plugin_host *)(void *)c, "companion", QC_INVALID_HANDLE);
    CHECK(qc_plugin_host_free((qc_plugin_host *)(void *)c) == QC_INVALID_HANDLE, "plugin_host_free(companion)");
    EXPECT("companion still alive", qc_companion_context_json(c, &out, &err_), QC_OK);
    qc_string_free(out);
    out = NULL;
    CHECK(qc_companion_free(c) == QC_OK, "companion_free");
    CHECK(qc_companion_free((qc_companion *)(void *)freed) == QC_INVALID_HANDLE, "companion_free(plugin host)");

    EXPECT("plugin_host_new", qc_plugin_host_new(cfg, &h, &err_), QC_OK);
    if (h == NULL)
        return;

    /* NULL required arguments */
    EXPECT("plugins_dir(out=NULL)", qc_plugin_host_plugins_dir(h, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT("startup_finished(out=NULL)", qc_plugin_host_startup_finished(h, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT_NOJ("unload(id=NULL)", qc_plugin_host_unload(h, NULL, &ej_, &err_), QC_NULL_PARAMETER, QC_NULL_PARAMETER);
    EXPECT("enable(id=NULL)", qc_plugin_host_enable(h, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT("disable(id=NULL)", qc_plugin_host_disable(h, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT("set_config_value(id=NULL)", qc_plugin_host_set_config_value(h, NULL, "k", "1", &err_), QC_NULL_PARAMETER);
    EXPECT("set_config_value(key=NULL)", qc_plugin_host_set_config_value(h, "a.b", NULL, "1", &err_),
           QC_NULL_PARAMETER);
    EXPECT("set_config_value(value=NULL)", qc_plugin_host_set_config_value(h, "a.b", "k", NULL, &err_),
           QC_NULL_PARAMETER);
    EXPECT_NOJ("install(src=NULL)", qc_plugin_host_install(h, NULL, &out, &ej_, &err_), QC_NULL_PARAMETER,
               QC_NULL_PARAMETER);
    EXPECT_NOJ("install(out=NULL)", qc_plugin_host_install(h, "/tmp", NULL, &ej_, &err_), QC_NULL_PARAMETER,
               QC_NULL_PARAMETER);
    EXPECT_NOJ("uninstall(id=NULL)", qc_plugin_host_uninstall(h, NULL, 0, &out, &ej_, &err_), QC_NULL_PARAMETER,
               QC_NULL_PARAMETER);
    EXPECT_NOJ("uninstall(out=NULL)", qc_plugin_host_uninstall(h, "a.b", 0, NULL, &ej_, &err_), QC_NULL_PARAMETER,
               QC_NULL_PARAMETER);
    EXPECT_NOJ("list(out=NULL)", qc_plugin_host_list(h, NULL, &ej_, &err_), QC_NULL_PARAMETER, QC_NULL_PARAMETER);
    EXPECT_NOJ("call(plugin=NULL)", qc_plugin_host_call(h, NULL, "t", "{}", NULL, &out, &ej_, &err_),
               QC_NULL_PARAMETER, QC_NULL_PARAMETER);
    EXPECT_NOJ("call(tool=NULL)", qc_plugin_host_call(h, "a.b", NULL, "{}", NULL, &out, &ej_, &err_),
               QC_NULL_PARAMETER, QC_NULL_PARAMETER);
    EXPECT_NOJ("call(out=NULL)", qc_plugin_host_call(h, "a.b", "t", "{}", NULL, NULL, &ej_, &err_),
               QC_NULL_PARAMETER, QC_NULL_PARAMETER);
    free_calls = 0;
    EXPECT("call_async(on_done=NULL)",
           qc_plugin_host_call_async(h, "a.b", "t", "{}", NULL, NULL, &free_calls, count_free, &err_),
           QC_NULL_PARAMETER);
    EXPECT("call_async(plugin=NULL)",
           qc_plugin_host_call_async(h, NULL, "t", "{}", NULL, json_cb, &free_calls, count_free, &err_),
           QC_NULL_PARAMETER);
    CHECK(free_calls == 0, "call_async took user_data on failure");
    EXPECT_NOJ("visible(plugin=NULL)", qc_plugin_host_visible(h, NULL, "/", &vis, &ej_, &err_), QC_NULL_PARAMETER,
               QC_NULL_PARAMETER);
    EXPECT_NOJ("visible(cwd=NULL)", qc_plugin_host_visible(h, "a.b", NULL, &vis, &ej_, &err_), QC_NULL_PARAMETER,
               QC_NULL_PARAMETER);
    EXPECT_NOJ("visible(out=NULL)", qc_plugin_host_visible(h, "a.b", "/", NULL, &ej_, &err_), QC_NULL_PARAMETER,
               QC_NULL_PARAMETER);
    EXPECT_NOJ("options(config=NULL)", qc_plugin_host_options(h, "a.b", NULL, &out, &ej_, &err_), QC_NULL_PARAMETER,
               QC_NULL_PARAMETER);
    EXPECT_NOJ("options(out=NULL)", qc_plugin_host_options(h, "a.b", "m", NULL, &ej_, &err_), QC_NULL_PARAMETER,
               QC_NULL_PARAMETER);
    EXPECT_NOJ("parse_document(mime=NULL)", qc_plugin_host_parse_document(h, NULL, data, 3, &out, &ej_, &err_),
               QC_NULL_PARAMETER, QC_NULL_PARAMETER);
    EXPECT_NOJ("parse_document(data=NULL, len=3)", qc_plugin_host_parse_document(h, "text/plain", NULL, 3, &out, &ej_, &err_),
               QC_NULL_PARAMETER, QC_NULL_PARAMETER);
    EXPECT_NOJ("parse_document(out=NULL)", qc_plugin_host_parse_document(h, "text/plain", data, 3, NULL, &ej_, &err_),
               QC_NULL_PARAMETER, QC_NULL_PARAMETER);
    EXPECT("set_capability_callback(name=NULL)",
           qc_plugin_host_set_capability_callback(h, NULL, cap_cb, &free_calls, count_free, &err_), QC_NULL_PARAMETER);
    EXPECT("offer_capability(name=NULL)", qc_plugin_host_offer_capability(h, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT("enable_events(out=NULL)", qc_plugin_host_enable_events(h, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT("next_event(out=NULL)", qc_plugin_host_next_event(h, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT("stats(plugin=NULL)", qc_plugin_host_stats(h, NULL, &out, &err_), QC_NULL_PARAMETER);
    EXPECT("stats(out=NULL)", qc_plugin_host_stats(h, "a.b", NULL, &err_), QC_NULL_PARAMETER);
    CHECK(free_calls == 0, "user_data taken on failure (%d)", free_calls);

    /* invalid UTF-8 */
    EXPECT_NOJ("unload(bad UTF-8)", qc_plugin_host_unload(h, bad, &ej_, &err_), QC_INVALID_UTF8, QC_INVALID_UTF8);
    EXPECT("enable(bad UTF-8)", qc_plugin_host_enable(h, bad, &err_), QC_INVALID_UTF8);
    EXPECT("disable(bad UTF-8)", qc_plugin_host_disable(h, bad, &err_), QC_INVALID_UTF8);
    EXPECT("set_config_value(bad UTF-8 key)", qc_plugin_host_set_config_value(h, "a.b", bad, "1", &err_),
           QC_INVALID_UTF8);
    EXPECT("set_config_value(bad UTF-8 value)", qc_plugin_host_set_config_value(h, "a.b", "k", "\"\xff\"", &err_),
           QC_INVALID_UTF8);
    EXPECT_NOJ("install(bad UTF-8)", qc_plugin_host_install(h, bad, &out, &ej_, &err_), QC_INVALID_UTF8,
               QC_INVALID_UTF8);
    EXPECT_NOJ("uninstall(bad UTF-8)", qc_plugin_host_uninstall(h, bad, 1, &out, &ej_, &err_), QC_INVALID_UTF8,
               QC_INVALID_UTF8);
    EXPECT_NOJ("call(bad UTF-8 plugin)", qc_plugin_host_call(h, bad, "t", "{}", NULL, &out, &ej_, &err_),
               QC_INVALID_UTF8, QC_INVALID_UTF8);
    EXPECT_NOJ("call(bad UTF-8 tool)", qc_plugin_host_call(h, "a.b", bad, "{}", NULL, &out, &ej_, &err_),
               QC_INVALID_UTF8, QC_INVALID_UTF8);
    EXPECT_NOJ("call(bad UTF-8 params)", qc_plugin_host_call(h, "a.b", "t", "{\"a\":\"\xff\"}", NULL, &out, &ej_, &err_),
               QC_INVALID_UTF8, QC_INVALID_UTF8);
    EXPECT_NOJ("call(bad UTF-8 options)", qc_plugin_host_call(h, "a.b", "t", "{}", "{\"cwd\":\"\xff\"}", &out, &ej_, &err_),
               QC_INVALID_UTF8, QC_INVALID_UTF8);
    EXPECT("call_async(bad UTF-8)",
           qc_plugin_host_call_async(h, "a.b", bad, "{}", NULL, json_cb, &free_calls, count_free, &err_),
           QC_INVALID_UTF8);
    EXPECT_NOJ("visible(bad UTF-8)", qc_plugin_host_visible(h, "a.b", bad, &vis, &ej_, &err_), QC_INVALID_UTF8,
               QC_INVALID_UTF8);
    EXPECT_NOJ("options(bad UTF-8)", qc_plugin_host_options(h, bad, "m", &out, &ej_, &err_), QC_INVALID_UTF8,
               QC_INVALID_UTF8);
    EXPECT_NOJ("parse_document(bad UTF-8 mime)", qc_plugin_host_parse_document(h, bad, data, 3, &out, &ej_, &err_),
               QC_INVALID_UTF8, QC_INVALID_UTF8);
    EXPECT("set_capability_callback(bad UTF-8)",
           qc_plugin_host_set_capability_callback(h, bad, cap_cb, &free_calls, count_free, &err_), QC_INVALID_UTF8);
    EXPECT("offer_capability(bad UTF-8)", qc_plugin_host_offer_capability(h, bad, &err_), QC_INVALID_UTF8);
    EXPECT("respond(bad UTF-8 message)", qc_plugin_host_respond(h, 1, NULL, bad, &err_), QC_INVALID_UTF8);
    EXPECT("respond(bad UTF-8 result)", qc_plugin_host_respond(h, 1, "\"\xff\"", NULL, &err_), QC_INVALID_UTF8);
    EXPECT("stats(bad UTF-8)", qc_plugin_host_stats(h, bad, &out, &err_), QC_INVALID_UTF8);
    CHECK(free_calls == 0, "user_data taken on failure (%d)", free_calls);

    /* invalid JSON */
    EXPECT("set_config_value(bad JSON)", qc_plugin_host_set_config_value(h, "a.b", "k", badjson, &err_),
           QC_INVALID_JSON);
    EXPECT_NOJ("call(bad JSON params)", qc_plugin_host_call(h, "a.b", "t", badjson, NULL, &out, &ej_, &err_),
               QC_INVALID_JSON, QC_INVALID_JSON);
    EXPECT_NOJ("call(bad JSON options)", qc_plugin_host_call(h, "a.b", "t", "{}", badjson, &out, &ej_, &err_),
               QC_INVALID_JSON, QC_INVALID_JSON);
    EXPECT_NOJ("call(unknown option)", qc_plugin_host_call(h, "a.b", "t", "{}", "{\"cwdd\":\"/\"}", &out, &ej_, &err_),
               QC_INVALID_JSON, QC_INVALID_JSON);
    EXPECT_NOJ("call(timeoutMs 0)", qc_plugin_host_call(h, "a.b", "t", "{}", "{\"timeoutMs\":0}", &out, &ej_, &err_),
               QC_INVALID_ARGUMENT, QC_INVALID_ARGUMENT);
    EXPECT("call_async(bad JSON)",
           qc_plugin_host_call_async(h, "a.b", "t", badjson, NULL, json_cb, &free_calls, count_free, &err_),
           QC_INVALID_JSON);
    EXPECT("respond(bad JSON)", qc_plugin_host_respond(h, 1, badjson, NULL, &err_), QC_INVALID_JSON);
    EXPECT("set_log_callback(level 0)", qc_plugin_host_set_log_callback(h, log_cb, &free_calls, count_free, 0, &err_),
           QC_INVALID_ARGUMENT);
    EXPECT("offer_capability(empty)", qc_plugin_host_offer_capability(h, "", &err_), QC_INVALID_ARGUMENT);
    CHECK(free_calls == 0, "user_data taken on failure (%d)", free_calls);
    CHECK(out == NULL && vis == -1, "out-parameter written on failure");

    /* host errors carry an owned error_json */
    ej = SENTINEL;
    EXPECT("call(unknown plugin)", qc_plugin_host_call(h, "no.such", "t", "{}", NULL, &out, &ej, &err_), QC_NOT_FOUND);
    CHECK(ej != NULL && ej != SENTINEL && strstr(ej, "\"kind\":\"not_found\"") != NULL, "call error_json %s",
          ej != NULL && ej != SENTINEL ? ej : "NULL");
    if (ej != SENTINEL)
        qc_string_free(ej);
    ej = SENTINEL;
    EXPECT("install(missing)", qc_plugin_host_install(h, "/no/such/folder", &out, &ej, &err_), QC_NOT_FOUND);
    CHECK(ej != NULL && ej != SENTINEL && strstr(ej, "\"code\":\"not_found\"") != NULL, "install error_json %s",
          ej != NULL && ej != SENTINEL ? ej : "NULL");
    if (ej != SENTINEL)
        qc_string_free(ej);
    ej = SENTINEL;
    EXPECT("list", qc_plugin_host_list(h, &out, &ej, &err_), QC_OK);
    CHECK(ej == NULL && out != NULL && strcmp(out, "[]") == 0, "list = %s", out != NULL ? out : "NULL");
    qc_string_free(out);
    out = NULL;
    EXPECT("stats(unknown)", qc_plugin_host_stats(h, "no.such", &out, &err_), QC_NOT_FOUND);
    EXPECT("enable(unknown)", qc_plugin_host_enable(h, "no.such", &err_), QC_NOT_FOUND);
    EXPECT("startup_finished(none)", qc_plugin_host_startup_finished(h, &out, &err_), QC_OK);
    CHECK(out != NULL && strcmp(out, "[]") == 0, "startup_finished = %s", out != NULL ? out : "NULL");
    qc_string_free(out);
    out = NULL;
    EXPECT("plugins_dir", qc_plugin_host_plugins_dir(h, &out, &err_), QC_OK);
    CHECK(out != NULL && strstr(out, base) == out, "plugins_dir = %s", out != NULL ? out : "NULL");
    qc_string_free(out);
    out = NULL;

    /* callbacks: replaced or freed user_data is finalized exactly once */
    free_calls = 0;
    EXPECT("set_event_callback", qc_plugin_host_set_event_callback(h, json_cb, &free_calls, count_free, &err_), QC_OK);
    EXPECT("set_event_callback(replace)", qc_plugin_host_set_event_callback(h, json_cb, &free_calls, count_free, &err_),
           QC_OK);
    CHECK(free_calls == 1, "replacing the event callback freed %d times", free_calls);
    EXPECT("set_log_callback", qc_plugin_host_set_log_callback(h, log_cb, &free_calls, count_free, 3, &err_), QC_OK);
    EXPECT("set_capability_callback",
           qc_plugin_host_set_capability_callback(h, "show_notification", cap_cb, &free_calls, count_free, &err_), QC_OK);
    EXPECT("set_capability_callback(remove)",
           qc_plugin_host_set_capability_callback(h, "show_notification", NULL, NULL, NULL, &err_), QC_OK);
    CHECK(free_calls == 2, "removing the capability callback: freed %d times, want 2", free_calls);
    EXPECT("set_capability_callback(again)",
           qc_plugin_host_set_capability_callback(h, "render_pdf", cap_cb, &free_calls, count_free, &err_), QC_OK);
    EXPECT("respond(unknown id)", qc_plugin_host_respond(h, 12345, "{}", NULL, &err_), QC_NOT_FOUND);

    /* pull mode */
    EXPECT("next_event(not enabled)", qc_plugin_host_next_event(h, &out, &err_), QC_REFUSED);
    EXPECT("enable_events", qc_plugin_host_enable_events(h, &fd, &err_), QC_OK);
    CHECK(fd >= 0, "enable_events fd = %d", fd);
    out = SENTINEL;
    EXPECT("next_event(empty)", qc_plugin_host_next_event(h, &out, &err_), QC_OK);
    CHECK(out == NULL, "next_event(empty) did not give NULL");
    out = NULL;
    EXPECT("respond(unknown pulled id)", qc_plugin_host_respond(h, 1, NULL, "no", &err_), QC_NOT_FOUND);

    CHECK(qc_plugin_host_free(h) == QC_OK, "plugin_host_free");
    CHECK(free_calls == 5, "after free, user data freed %d times, want 5", free_calls);
    EXPECT("reload(freed)", qc_plugin_host_reload(h, &err_), QC_INVALID_HANDLE);
    (void)err;
}

/* ---- qc_plugin_host_mcp_* and qc_mcp_register / qc_mcp_unregister:
 * NULL arguments, invalid UTF-8 and JSON, the running/not-running states,
 * free while running (the lock file goes), a settings file refused intact. */
static int read_file(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    size_t n;
    if (f == NULL)
        return -1;
    n = fread(buf, 1, cap - 1, f);
    buf[n] = '\0';
    fclose(f);
    return (int)n;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        perror(path);
        return;
    }
    fputs(text, f);
    fclose(f);
}

static void test_plugin_mcp(const char *base)
{
    qc_plugin_host *h = NULL;
    char cfg[600], mcfg[600], lockfile[600], bridge[400], proj[400], qdir[420], settings[460], opts[1400];
    char *out = NULL, after[256];
    const char *bad_trailing = "{\n  \"a\": 1,\n}\n";

    snprintf(cfg, sizeof cfg, "{\"pluginsDir\":\"%s/mcp-plugins\"}", base);
    snprintf(mcfg, sizeof mcfg, "{\"lockDir\":\"%s/mcp-locks\"}", base);
    snprintf(lockfile, sizeof lockfile, "%s/mcp-locks/%d.lock", base, (int)getpid());
    EXPECT("plugin_host_new(mcp)", qc_plugin_host_new(cfg, &h, &err_), QC_OK);
    if (h == NULL)
        return;
    EXPECT("mcp_info(out=NULL)", qc_plugin_host_mcp_info(h, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT("mcp_info(not running)", qc_plugin_host_mcp_info(h, &out, &err_), QC_NOT_RUNNING);
    EXPECT("mcp_stop(not running)", qc_plugin_host_mcp_stop(h, &err_), QC_NOT_RUNNING);
    EXPECT("mcp_start(invalid UTF-8)", qc_plugin_host_mcp_start(h, "{\"lockDir\":\"\xff\"}", &err_), QC_INVALID_UTF8);
    EXPECT("mcp_start(invalid JSON)", qc_plugin_host_mcp_start(h, "{\"lockDir\":", &err_), QC_INVALID_JSON);
    EXPECT("mcp_start(unknown field)", qc_plugin_host_mcp_start(h, "{\"port\":1}", &err_), QC_INVALID_JSON);
    EXPECT("mcp_start(out of range)", qc_plugin_host_mcp_start(h, "{\"maxSessions\":0}", &err_), QC_INVALID_ARGUMENT);
    CHECK(out == NULL, "mcp_info wrote out on failure");
    EXPECT("mcp_start", qc_plugin_host_mcp_start(h, mcfg, &err_), QC_OK);
    EXPECT("mcp_start(again)", qc_plugin_host_mcp_start(h, mcfg, &err_), QC_ALREADY_RUNNING);
    CHECK(file_exists(lockfile), "lock file %s written", lockfile);
    EXPECT("mcp_info", qc_plugin_host_mcp_info(h, &out, &err_), QC_OK);
    CHECK(out != NULL && strstr(out, "\"Authorization\":\"Bearer ") != NULL, "mcp_info: %s", out ? out : "NULL");
    CHECK(out != NULL && strstr(out, "\"plugins-status\"") != NULL, "mcp_info tools: %s", out ? out : "NULL");
    qc_string_free(out);
    out = NULL;
    EXPECT("mcp_stop", qc_plugin_host_mcp_stop(h, &err_), QC_OK);
    CHECK(!file_exists(lockfile), "mcp_stop removes the lock file");
    EXPECT("mcp_stop(twice)", qc_plugin_host_mcp_stop(h, &err_), QC_NOT_RUNNING);
    EXPECT("mcp_start(after stop)", qc_plugin_host_mcp_start(h, mcfg, &err_), QC_OK);
    CHECK(qc_plugin_host_free(h) == QC_OK, "plugin_host_free(mcp running)");
    CHECK(!file_exists(lockfile), "free removes the lock file");
    EXPECT("mcp_info(freed)", qc_plugin_host_mcp_info(h, &out, &err_), QC_INVALID_HANDLE);

    /* the view server */
    EXPECT("plugin_host_new(views)", qc_plugin_host_new(cfg, &h, &err_), QC_OK);
    if (h == NULL)
        return;
    EXPECT("views_json(out=NULL)", qc_plugin_host_views_json(h, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT("views_json(not running)", qc_plugin_host_views_json(h, &out, &err_), QC_NOT_RUNNING);
    EXPECT("view_url(not running)", qc_plugin_host_view_url(h, "a.b", "v", &out, &err_), QC_NOT_RUNNING);
    EXPECT("views_stop(not running)", qc_plugin_host_views_stop(h, &err_), QC_NOT_RUNNING);
    EXPECT("set_color_scheme(NULL)", qc_plugin_host_set_color_scheme(h, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT("set_color_scheme(blue)", qc_plugin_host_set_color_scheme(h, "blue", &err_), QC_INVALID_ARGUMENT);
    EXPECT("set_color_scheme(invalid UTF-8)", qc_plugin_host_set_color_scheme(h, "\xff", &err_), QC_INVALID_UTF8);
    EXPECT("set_color_scheme(dark, not running)", qc_plugin_host_set_color_scheme(h, "dark", &err_), QC_OK);
    EXPECT("views_start(invalid JSON)", qc_plugin_host_views_start(h, "{", &out, &err_), QC_INVALID_JSON);
    EXPECT("views_start(unknown field)", qc_plugin_host_views_start(h, "{\"port\":1}", &out, &err_), QC_INVALID_JSON);
    EXPECT("views_start(bad scheme)", qc_plugin_host_views_start(h, "{\"colorScheme\":\"x\"}", &out, &err_),
           QC_INVALID_ARGUMENT);
    EXPECT("views_start(invalid UTF-8)", qc_plugin_host_views_start(h, "{\"colorScheme\":\"\xff\"}", &out, &err_),
           QC_INVALID_UTF8);
    CHECK(out == NULL, "views_start wrote out on failure");
    EXPECT("views_start(out=NULL allowed)", qc_plugin_host_views_start(h, NULL, NULL, &err_), QC_OK);
    EXPECT("views_start(again)", qc_plugin_host_views_start(h, NULL, &out, &err_), QC_ALREADY_RUNNING);
    EXPECT("views_json", qc_plugin_host_views_json(h, &out, &err_), QC_OK);
    CHECK(out != NULL && strstr(out, "\"colorScheme\":\"dark\"") != NULL && strstr(out, "\"views\":[]") != NULL,
          "views_json: %s", out ? out : "NULL");
    qc_string_free(out);
    out = NULL;
    EXPECT("view_url(plugin=NULL)", qc_plugin_host_view_url(h, NULL, "v", &out, &err_), QC_NULL_PARAMETER);
    EXPECT("view_url(out=NULL)", qc_plugin_host_view_url(h, "a.b", "v", NULL, &err_), QC_NULL_PARAMETER);
    EXPECT("view_url(unknown)", qc_plugin_host_view_url(h, "a.b", NULL, &out, &err_), QC_NOT_FOUND);
    EXPECT("view_url(invalid UTF-8)", qc_plugin_host_view_url(h, "a.b", "\xfe", &out, &err_), QC_INVALID_UTF8);
    CHECK(out == NULL, "view_url wrote out on failure");
    EXPECT("views_stop", qc_plugin_host_views_stop(h, &err_), QC_OK);
    EXPECT("views_stop(twice)", qc_plugin_host_views_stop(h, &err_), QC_NOT_RUNNING);
    EXPECT("views_start(after stop)", qc_plugin_host_views_start(h, NULL, &out, &err_), QC_OK);
    qc_string_free(out);
    out = NULL;
    CHECK(qc_plugin_host_free(h) == QC_OK, "plugin_host_free(views running)");
    EXPECT("views_json(freed)", qc_plugin_host_views_json(h, &out, &err_), QC_INVALID_HANDLE);

    /* register / unregister */
    snprintf(bridge, sizeof bridge, "%s/qc-mcp-bridge", base);
    write_file(bridge, "#!/bin/sh\nexit 1\n");
    chmod(bridge, 0755);
    snprintf(proj, sizeof proj, "%s/mcp-proj", base);
    snprintf(qdir, sizeof qdir, "%s/.qwen", proj);
    snprintf(settings, sizeof settings, "%s/settings.json", qdir);
    if (mkdir(proj, 0700) != 0 || mkdir(qdir, 0700) != 0) {
        perror("mkdir");
        return;
    }
    snprintf(opts, sizeof opts, "{\"scope\":\"project\",\"project\":\"%s\",\"bridge\":\"%s\"}", proj, bridge);
    EXPECT("mcp_register(options=NULL)", qc_mcp_register(NULL, &out, &err_), QC_NULL_PARAMETER);
    EXPECT("mcp_register(out=NULL)", qc_mcp_register(opts, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT("mcp_unregister(options=NULL)", qc_mcp_unregister(NULL, &out, &err_), QC_NULL_PARAMETER);
    EXPECT("mcp_unregister(out=NULL)", qc_mcp_unregister(opts, NULL, &err_), QC_NULL_PARAMETER);
    EXPECT("mcp_register(invalid UTF-8)", qc_mcp_register("{\"bridge\":\"\xff\"}", &out, &err_), QC_INVALID_UTF8);
    EXPECT("mcp_unregister(invalid UTF-8)", qc_mcp_unregister("{\"project\":\"\xfe\"}", &out, &err_), QC_INVALID_UTF8);
    EXPECT("mcp_register(invalid JSON)", qc_mcp_register("{\"scope\":", &out, &err_), QC_INVALID_JSON);
    EXPECT("mcp_unregister(invalid JSON)", qc_mcp_unregister("[", &out, &err_), QC_INVALID_JSON);
    EXPECT("mcp_register(bad scope)", qc_mcp_register("{\"scope\":\"all\"}", &out, &err_), QC_INVALID_ARGUMENT);
    EXPECT("mcp_register(no bridge)", qc_mcp_register("{\"scope\":\"user\"}", &out, &err_), QC_INVALID_ARGUMENT);
    EXPECT("mcp_register(project without project)",
           qc_mcp_register("{\"scope\":\"project\",\"bridge\":\"/bin/sh\"}", &out, &err_), QC_INVALID_ARGUMENT);
    CHECK(out == NULL, "mcp_register wrote out on failure");
    EXPECT("mcp_register(project)", qc_mcp_register(opts, &out, &err_), QC_OK);
    CHECK(out != NULL && strstr(out, "\"change\":\"added\"") != NULL && strstr(out, "qwen mcp approve") != NULL,
          "mcp_register: %s", out ? out : "NULL");
    qc_string_free(out);
    out = NULL;
    EXPECT("mcp_unregister(project)", qc_mcp_unregister(opts, &out, &err_), QC_OK);
    CHECK(out != NULL && strstr(out, "\"change\":\"removed\"") != NULL, "mcp_unregister: %s", out ? out : "NULL");
    qc_string_free(out);
    out = NULL;
    write_file(settings, bad_trailing);
    EXPECT("mcp_register(trailing comma)", qc_mcp_register(opts, &out, &err_), QC_INVALID_JSON);
    EXPECT("mcp_unregister(trailing comma)", qc_mcp_unregister(opts, &out, &err_), QC_INVALID_JSON);
    CHECK(out == NULL, "mcp_unregister wrote out on failure");
    CHECK(read_file(settings, after, sizeof after) >= 0 && strcmp(after, bad_trailing) == 0,
          "refused settings changed: %s", after);
}

int main(void)
{
    char tmpl[] = "/tmp/qc-abi-XXXXXX";
    char lockdir[256], ws[256], lockdir_json[300], cmd[600];
    char *base = mkdtemp(tmpl);

    if (base == NULL) {
        perror("mkdtemp");
        return 2;
    }
    snprintf(lockdir, sizeof lockdir, "%s/ide", base);
    snprintf(ws, sizeof ws, "%s/ws", base);
    if (mkdir(ws, 0700) != 0) {
        perror("mkdir");
        return 2;
    }
    snprintf(lockdir_json, sizeof lockdir_json, "\"lockDir\":\"%s\"", lockdir);

    test_static();
    test_null_frees();
    test_new_errors(lockdir_json);
    test_lifecycle(lockdir, lockdir_json, ws);
    test_start_io_error();
    test_plugin_host(base);
    test_plugin_mcp(base);

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    if (system(cmd) != 0)
        fprintf(stderr, "warning: could not remove %s\n", base);

    printf("abi-misuse: %d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
