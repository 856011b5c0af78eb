/*
 * qcdemo — a small C host for the qwen-companion C ABI.
 *
 * `qcdemo ide` plays the part of an editor: it starts a companion (the MCP
 * server that Qwen Code connects to), turns commands read from stdin into
 * editor events and prints what happens as JSON lines on stdout.
 * `qcdemo sessions ps|listen|send` joins Qwen Code's cross-session messaging
 * as a participant (qc_participant_*): it lists the live sessions, receives
 * messages (with the hold / release / deny decisions of its user), sends and
 * follows receipts. See `qcdemo --help` and `qcdemo sessions --help`.
 *
 * Only the public header is used. Subcommands are dispatched on argv[1]
 * through the `subcommands` table at the bottom of this file; add new ones
 * there.
 *
 * Threads: the main thread reads stdin and calls the library; the library
 * runs every callback on its own callback thread. The two share stdout (one
 * mutex, one whole line per write, flushed) and the diff table (one mutex).
 * While the main thread sends a message, events from callbacks wait in a
 * buffer (under the stdout mutex) so that "sent" precedes its receipts.
 *
 * Signals: SIGTERM, SIGINT and SIGHUP are blocked in every thread (they are
 * blocked before the library creates any thread, and threads inherit the
 * mask) and unblocked only atomically inside pselect() in the main thread.
 * A signal therefore always interrupts the wait for stdin and never lands in
 * a library thread.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "qwen_companion.h"

#define QCDEMO_NAME "qcdemo"

/* ------------------------------------------------------------------------ */
/* Memory and growable byte buffers                                          */
/* ------------------------------------------------------------------------ */

static void die_oom(void)
{
    fputs(QCDEMO_NAME ": out of memory\n", stderr);
    abort();
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL)
        die_oom();
    return q;
}

/* Copy of n bytes plus a terminating NUL. */
static char *xmemdup(const char *s, size_t n)
{
    char *p;
    if (n == SIZE_MAX)
        die_oom();
    p = xrealloc(NULL, n + 1);
    if (n > 0)
        memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

/* A NUL-terminated, growable byte buffer. */
typedef struct {
    char *data;
    size_t len;
    size_t cap;
} sbuf;

static void sb_reserve(sbuf *b, size_t extra)
{
    size_t need, cap;
    if (extra > SIZE_MAX - b->len - 1)
        die_oom();
    need = b->len + extra + 1;
    if (need <= b->cap)
        return;
    cap = b->cap ? b->cap : 128;
    while (cap < need)
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

static void sb_putn(sbuf *b, const char *s, size_t n)
{
    sb_reserve(b, n);
    if (n > 0)
        memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

static void sb_puts(sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

static void sb_putc(sbuf *b, char c) { sb_putn(b, &c, 1); }

static void sb_vprintf(sbuf *b, const char *fmt, va_list ap)
{
    char small[256];
    va_list ap2;
    int n;
    va_copy(ap2, ap);
    n = vsnprintf(small, sizeof small, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        sb_putn(b, small, (size_t)n);
        return;
    }
    sb_reserve(b, (size_t)n);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

static void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(b, fmt, ap);
    va_end(ap);
}

static void sb_free(sbuf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* ------------------------------------------------------------------------ */
/* JSON output                                                                */
/* ------------------------------------------------------------------------ */

/*
 * Length of the well-formed UTF-8 sequence at s (at most n bytes), or 0 if
 * the bytes there are not well-formed UTF-8 (overlong forms, surrogates and
 * values above U+10FFFF are rejected, as in RFC 3629).
 */
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    unsigned char lo = 0x80, hi = 0xBF;
    size_t len, i;

    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return len;
}

/*
 * Append s[0..n) as a JSON string literal. '"' and '\' are escaped, control
 * characters (and DEL) become \u00XX, well-formed UTF-8 is copied as-is and
 * every byte that is not part of well-formed UTF-8 becomes \ufffd, so the
 * output is always valid JSON.
 */
static void sb_json_strn(sbuf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;

    sb_putc(b, '"');
    while (i < n) {
        unsigned char c = p[i];
        if (c == '"' || c == '\\') {
            char esc[2];
            esc[0] = '\\';
            esc[1] = (char)c;
            sb_putn(b, esc, 2);
            i++;
        } else if (c < 0x20 || c == 0x7F) {
            char esc[6];
            esc[0] = '\\';
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 0xF];
            sb_putn(b, esc, 6);
            i++;
        } else if (c < 0x80) {
            sb_putc(b, (char)c);
            i++;
        } else {
            size_t len = utf8_seq_len(p + i, n - i);
            if (len == 0) {
                sb_puts(b, "\\ufffd");
                i++;
            } else {
                sb_putn(b, (const char *)p + i, len);
                i += len;
            }
        }
    }
    sb_putc(b, '"');
}

static void sb_json_str(sbuf *b, const char *s)
{
    if (s == NULL)
        sb_puts(b, "null");
    else
        sb_json_strn(b, s, strlen(s));
}

/* stdout is shared by the main thread and the library's callback thread. */
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;

/* Write b as one line on stdout and flush; the caller holds out_lock. */
static void write_line_locked(const sbuf *b)
{
    fwrite(b->data, 1, b->len, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

/* Write b as one line on stdout and flush; b must hold one JSON object. */
static void emit_line(const sbuf *b)
{
    pthread_mutex_lock(&out_lock);
    write_line_locked(b);
    pthread_mutex_unlock(&out_lock);
}

/* {"event":"error","message":<printf-formatted message>} */
static void emit_error(const char *fmt, ...)
{
    sbuf msg = {0}, line = {0};
    va_list ap;

    va_start(ap, fmt);
    sb_vprintf(&msg, fmt, ap);
    va_end(ap);

    sb_puts(&line, "{\"event\":\"error\",\"message\":");
    sb_json_strn(&line, msg.data ? msg.data : "", msg.len);
    sb_putc(&line, '}');
    emit_line(&line);
    sb_free(&msg);
    sb_free(&line);
}

/*
 * Report the outcome of a library call made for `what`: on failure emit an
 * error event "<what>: <QC_STATUS_NAME>: <library message>". In every case
 * free the library's error string *errp (errp may be NULL) and reset it.
 * errp is a pointer so that *errp is read after the call has filled it in:
 * in check_status(w, qc_f(..., &err), &err) the order in which the
 * arguments are evaluated does not matter.
 * Returns 1 on success, 0 on failure.
 */
static int check_status(const char *what, qc_status st, char **errp)
{
    char *err = errp != NULL ? *errp : NULL;
    int ok = (st == QC_OK);
    if (!ok)
        emit_error("%s: %s: %s", what, qc_status_name(st),
                   err != NULL ? err : "(no message)");
    qc_string_free(err);
    if (errp != NULL)
        *errp = NULL;
    return ok;
}

/* Library log lines go to stderr only; stdout carries nothing but events. */
static void on_log(void *user_data, uint32_t level, const char *message)
{
    static const char *const names[] = {"?", "error", "warn", "info", "debug", "trace"};
    (void)user_data;
    fprintf(stderr, QCDEMO_NAME ": [%s] %s\n", level <= 5 ? names[level] : "?",
            message != NULL ? message : "");
}

/* ------------------------------------------------------------------------ */
/* Diff table: path -> proposed text, and the text the user ended up with     */
/* ------------------------------------------------------------------------ */

typedef struct diff_entry {
    struct diff_entry *next;
    char *path;
    char *proposed; /* newContent of openDiff */
    size_t proposed_len;
    char *edited; /* NULL unless the user edited the diff (accept-from) */
    size_t edited_len;
} diff_entry;

typedef struct {
    pthread_mutex_t lock;
    diff_entry *head;
} diff_table;

static void diff_entry_free(diff_entry *e)
{
    free(e->path);
    free(e->proposed);
    free(e->edited);
    free(e);
}

/* Caller holds t->lock. */
static diff_entry **diff_find_locked(diff_table *t, const char *path)
{
    diff_entry **pp;
    for (pp = &t->head; *pp != NULL; pp = &(*pp)->next)
        if (strcmp((*pp)->path, path) == 0)
            return pp;
    return NULL;
}

/* A diff was opened (or re-opened): remember its proposed text. */
static void diff_put(diff_table *t, const char *path, const char *text, size_t len)
{
    diff_entry **pp, *e;
    pthread_mutex_lock(&t->lock);
    pp = diff_find_locked(t, path);
    if (pp != NULL) {
        e = *pp;
        free(e->proposed);
        free(e->edited);
        e->edited = NULL;
        e->edited_len = 0;
    } else {
        e = xrealloc(NULL, sizeof *e);
        e->path = xmemdup(path, strlen(path));
        e->edited = NULL;
        e->edited_len = 0;
        e->next = t->head;
        t->head = e;
    }
    e->proposed = xmemdup(text != NULL ? text : "", text != NULL ? len : 0);
    e->proposed_len = text != NULL ? len : 0;
    pthread_mutex_unlock(&t->lock);
}

/* Record (text != NULL) or forget (text == NULL) the user's edited text.
 * Returns 0 if no diff is known for path. */
static int diff_set_edited(diff_table *t, const char *path, const char *text, size_t len)
{
    diff_entry **pp;
    pthread_mutex_lock(&t->lock);
    pp = diff_find_locked(t, path);
    if (pp != NULL) {
        free((*pp)->edited);
        (*pp)->edited = text != NULL ? xmemdup(text, len) : NULL;
        (*pp)->edited_len = text != NULL ? len : 0;
    }
    pthread_mutex_unlock(&t->lock);
    return pp != NULL;
}

static void diff_remove(diff_table *t, const char *path)
{
    diff_entry **pp, *e;
    pthread_mutex_lock(&t->lock);
    pp = diff_find_locked(t, path);
    if (pp != NULL) {
        e = *pp;
        *pp = e->next;
        diff_entry_free(e);
    }
    pthread_mutex_unlock(&t->lock);
}

/* Remove the diff for path and hand back a copy of its current text (the
 * edited text if any, else the proposed text). Returns 0 if unknown. */
static int diff_take_current(diff_table *t, const char *path, char **text, size_t *len)
{
    diff_entry **pp, *e;
    pthread_mutex_lock(&t->lock);
    pp = diff_find_locked(t, path);
    if (pp == NULL) {
        pthread_mutex_unlock(&t->lock);
        return 0;
    }
    e = *pp;
    *pp = e->next;
    pthread_mutex_unlock(&t->lock);
    if (e->edited != NULL) {
        *text = e->edited;
        *len = e->edited_len;
        e->edited = NULL;
    } else {
        *text = e->proposed;
        *len = e->proposed_len;
        e->proposed = NULL;
    }
    diff_entry_free(e);
    return 1;
}

static void diff_table_clear(diff_table *t)
{
    diff_entry *e, *next;
    pthread_mutex_lock(&t->lock);
    for (e = t->head; e != NULL; e = next) {
        next = e->next;
        diff_entry_free(e);
    }
    t->head = NULL;
    pthread_mutex_unlock(&t->lock);
}

/* ------------------------------------------------------------------------ */
/* The `ide` subcommand                                                       */
/* ------------------------------------------------------------------------ */

typedef struct {
    qc_companion *companion;
    diff_table diffs;
    int stop_requested;
} ide_demo;

/* openDiff from the CLI: show it (remember it, print an event). */
static int32_t on_open_diff(void *user_data, const char *file_path, const char *new_content,
                            size_t new_content_len, qc_reply *reply)
{
    ide_demo *d = user_data;
    sbuf line = {0};
    (void)reply;

    if (file_path == NULL)
        return 1;
    if (new_content == NULL)
        new_content_len = 0;
    diff_put(&d->diffs, file_path, new_content, new_content_len);

    sb_puts(&line, "{\"event\":\"diff_opened\",\"filePath\":");
    sb_json_str(&line, file_path);
    sb_puts(&line, ",\"newContent\":");
    sb_json_strn(&line, new_content != NULL ? new_content : "", new_content_len);
    sb_putc(&line, '}');
    emit_line(&line);
    sb_free(&line);
    return 0;
}

/* closeDiff from the CLI: close it and answer with its current text. */
static int32_t on_close_diff(void *user_data, const char *file_path, qc_reply *reply)
{
    ide_demo *d = user_data;
    sbuf line = {0};
    char *text = NULL, *err = NULL;
    size_t len = 0;

    if (file_path == NULL)
        return 1;
    sb_puts(&line, "{\"event\":\"diff_close_requested\",\"filePath\":");
    sb_json_str(&line, file_path);
    sb_putc(&line, '}');
    emit_line(&line);
    sb_free(&line);

    /* An unknown diff is not open: close succeeds, content stays null. */
    if (diff_take_current(&d->diffs, file_path, &text, &len)) {
        check_status("closeDiff reply", qc_reply_set_text(reply, text, len, &err), &err);
        free(text);
    }
    return 0;
}

/* Make a workspace root absolute relative to the current directory (without
 * resolving symlinks: the user's spelling of the path is kept). */
static void sb_json_root(sbuf *b, const char *dir, size_t n)
{
    if (n > 0 && dir[0] != '/') {
        sbuf abs = {0};
        char *cwd = getcwd(NULL, 0);
        if (cwd != NULL) {
            sb_puts(&abs, cwd);
            if (abs.len == 0 || abs.data[abs.len - 1] != '/')
                sb_putc(&abs, '/');
            free(cwd);
        }
        sb_putn(&abs, dir, n);
        sb_json_strn(b, abs.data, abs.len);
        sb_free(&abs);
    } else {
        sb_json_strn(b, dir, n);
    }
}

/* "DIR[:DIR...]" -> JSON array of strings. Returns the number of roots. */
static size_t sb_json_roots(sbuf *b, const char *spec)
{
    size_t count = 0;
    const char *p = spec;
    sb_putc(b, '[');
    for (;;) {
        const char *colon = strchr(p, ':');
        size_t n = colon != NULL ? (size_t)(colon - p) : strlen(p);
        if (n > 0) {
            if (count > 0)
                sb_putc(b, ',');
            sb_json_root(b, p, n);
            count++;
        }
        if (colon == NULL)
            break;
        p = colon + 1;
    }
    sb_putc(b, ']');
    return count;
}

/* Decode the escapes of `select TEXT`: \n, \t and \\ (any other backslash is
 * kept literally). */
static char *unescape_text(const char *s, size_t *out_len)
{
    size_t n = strlen(s), i, j = 0;
    char *out = xrealloc(NULL, n + 1);
    for (i = 0; i < n; i++) {
        if (s[i] == '\\' && i + 1 < n) {
            char c = s[i + 1];
            if (c == 'n' || c == 't' || c == '\\') {
                out[j++] = c == 'n' ? '\n' : c == 't' ? '\t' : '\\';
                i++;
                continue;
            }
        }
        out[j++] = s[i];
    }
    out[j] = '\0';
    *out_len = j;
    return out;
}

/* Read a whole file. Returns NULL (errno set) on failure. */
static char *read_file(const char *path, size_t *out_len)
{
    FILE *f = fopen(path, "rb");
    sbuf b = {0};
    char chunk[8192];
    size_t got;
    int saved;

    if (f == NULL)
        return NULL;
    sb_reserve(&b, 0);
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0)
        sb_putn(&b, chunk, got);
    if (ferror(f)) {
        saved = errno;
        fclose(f);
        sb_free(&b);
        errno = saved ? saved : EIO;
        return NULL;
    }
    fclose(f);
    *out_len = b.len;
    return b.data;
}

/* Parse a decimal uint32 that must span the whole of [s, end). */
static int parse_u32(const char *s, const char *end, uint32_t *out)
{
    uint64_t v = 0;
    if (s == end)
        return 0;
    for (; s < end; s++) {
        if (*s < '0' || *s > '9')
            return 0;
        v = v * 10 + (uint64_t)(*s - '0');
        if (v > UINT32_MAX)
            return 0;
    }
    *out = (uint32_t)v;
    return 1;
}

/* ---- stdin commands. `arg` is the rest of the line after "VERB " ("" if
 * none); a handler may assume nothing else about it. */

typedef void (*ide_cmd_fn)(ide_demo *d, const char *verb, const char *arg);

static int require_arg(const char *verb, const char *arg, const char *usage)
{
    if (arg[0] == '\0') {
        emit_error("%s: missing argument (usage: %s %s)", verb, verb, usage);
        return 0;
    }
    return 1;
}

static void cmd_open(ide_demo *d, const char *verb, const char *arg)
{
    char *err = NULL;
    if (require_arg(verb, arg, "PATH"))
        check_status(verb, qc_companion_file_opened(d->companion, arg, &err), &err);
}

static void cmd_focus(ide_demo *d, const char *verb, const char *arg)
{
    char *err = NULL;
    if (require_arg(verb, arg, "PATH"))
        check_status(verb, qc_companion_file_focused(d->companion, arg, &err), &err);
}

static void cmd_close(ide_demo *d, const char *verb, const char *arg)
{
    char *err = NULL;
    if (require_arg(verb, arg, "PATH"))
        check_status(verb, qc_companion_file_closed(d->companion, arg, &err), &err);
}

static void cmd_cursor(ide_demo *d, const char *verb, const char *arg)
{
    const char *sp = strchr(arg, ' ');
    uint32_t line, character;
    char *err = NULL;

    if (sp == NULL || !parse_u32(arg, sp, &line) || !parse_u32(sp + 1, sp + 1 + strlen(sp + 1), &character)) {
        emit_error("%s: expected two unsigned integers (usage: cursor LINE CHAR)", verb);
        return;
    }
    check_status(verb, qc_companion_set_cursor(d->companion, NULL, line, character, &err), &err);
}

static void cmd_select(ide_demo *d, const char *verb, const char *arg)
{
    char *err = NULL;
    if (arg[0] == '\0') {
        /* no text: clear the selection */
        check_status(verb, qc_companion_set_selection(d->companion, NULL, NULL, 0, &err), &err);
    } else {
        size_t len;
        char *text = unescape_text(arg, &len);
        check_status(verb, qc_companion_set_selection(d->companion, NULL, text, len, &err), &err);
        free(text);
    }
}

static void cmd_context(ide_demo *d, const char *verb, const char *arg)
{
    char *err = NULL;
    if (require_arg(verb, arg, "JSON"))
        check_status(verb, qc_companion_set_context_json(d->companion, arg, &err), &err);
}

static void cmd_workspace(ide_demo *d, const char *verb, const char *arg)
{
    sbuf roots = {0};
    char *err = NULL;
    if (!require_arg(verb, arg, "DIR[:DIR...]"))
        return;
    sb_json_roots(&roots, arg);
    check_status(verb, qc_companion_set_workspace_roots_json(d->companion, roots.data, &err), &err);
    sb_free(&roots);
}

static void cmd_trust(ide_demo *d, const char *verb, const char *arg)
{
    char *err = NULL;
    int32_t trusted;
    if (strcmp(arg, "true") == 0) {
        trusted = 1;
    } else if (strcmp(arg, "false") == 0) {
        trusted = 0;
    } else {
        emit_error("%s: expected true or false (usage: trust true|false)", verb);
        return;
    }
    check_status(verb, qc_companion_set_trusted(d->companion, trusted, &err), &err);
}

static void cmd_accept(ide_demo *d, const char *verb, const char *arg)
{
    char *err = NULL;
    if (!require_arg(verb, arg, "PATH"))
        return;
    if (check_status(verb, qc_companion_diff_accept(d->companion, arg, NULL, 0, &err), &err))
        diff_set_edited(&d->diffs, arg, NULL, 0); /* the user kept the proposed text */
}

static void cmd_accept_from(ide_demo *d, const char *verb, const char *arg)
{
    const char *sp = strchr(arg, ' ');
    char *file, *text, *err = NULL;
    const char *path;
    size_t len = 0;

    if (sp == NULL || sp == arg || sp[1] == '\0') {
        emit_error("%s: missing argument (usage: accept-from FILE PATH)", verb);
        return;
    }
    file = xmemdup(arg, (size_t)(sp - arg));
    path = sp + 1;
    text = read_file(file, &len);
    if (text == NULL) {
        emit_error("%s: cannot read %s: %s", verb, file, strerror(errno));
        free(file);
        return;
    }
    /* Record first, so that a closeDiff racing with the accept already sees
     * the edited text. */
    diff_set_edited(&d->diffs, path, text, len);
    check_status(verb, qc_companion_diff_accept(d->companion, path, text, len, &err), &err);
    free(text);
    free(file);
}

static void cmd_reject(ide_demo *d, const char *verb, const char *arg)
{
    char *err = NULL;
    if (!require_arg(verb, arg, "PATH"))
        return;
    if (check_status(verb, qc_companion_diff_reject(d->companion, arg, &err), &err))
        diff_remove(&d->diffs, arg);
}

static void cmd_closed(ide_demo *d, const char *verb, const char *arg)
{
    char *err = NULL;
    if (!require_arg(verb, arg, "PATH"))
        return;
    if (check_status(verb, qc_companion_diff_closed(d->companion, arg, &err), &err))
        diff_remove(&d->diffs, arg);
}

static void cmd_stop(ide_demo *d, const char *verb, const char *arg)
{
    (void)verb;
    (void)arg;
    d->stop_requested = 1;
}

static const struct {
    const char *verb;
    ide_cmd_fn fn;
} ide_commands[] = {
    {"open", cmd_open},
    {"focus", cmd_focus},
    {"close", cmd_close},
    {"cursor", cmd_cursor},
    {"select", cmd_select},
    {"context", cmd_context},
    {"workspace", cmd_workspace},
    {"trust", cmd_trust},
    {"accept", cmd_accept},
    {"accept-from", cmd_accept_from},
    {"reject", cmd_reject},
    {"closed", cmd_closed},
    {"stop", cmd_stop},
};

/*
 * Split one stdin line (without its '\n') into "VERB ARG" in place: a final
 * '\r' is dropped, ARG is the rest of the line after the first space ("" if
 * none). Returns 0 for blank lines, comments ('#') and lines with a NUL byte
 * (an error event is printed for those).
 */
static int split_command(char *line, size_t len, char **verb, char **arg)
{
    char *sp;

    if (len > 0 && line[len - 1] == '\r')
        line[--len] = '\0';
    if (len == 0 || line[0] == '#')
        return 0; /* blank lines and comments */
    if (memchr(line, '\0', len) != NULL) {
        emit_error("command line contains a NUL byte");
        return 0;
    }
    *verb = line;
    sp = strchr(line, ' ');
    if (sp != NULL) {
        *sp = '\0';
        *arg = sp + 1;
    } else {
        *arg = line + len; /* "" */
    }
    return 1;
}

/* One stdin line (without its '\n'). */
static void ide_handle_line(ide_demo *d, char *line, size_t len)
{
    char *verb, *arg;
    size_t i;

    if (!split_command(line, len, &verb, &arg))
        return;
    for (i = 0; i < sizeof ide_commands / sizeof ide_commands[0]; i++) {
        if (strcmp(verb, ide_commands[i].verb) == 0) {
            ide_commands[i].fn(d, verb, arg);
            return;
        }
    }
    emit_error("unknown command: %s", verb);
}

/* ---- signals */

static volatile sig_atomic_t stop_signal = 0;

static void on_stop_signal(int sig) { stop_signal = sig; }

static const int stop_signals[] = {SIGTERM, SIGINT, SIGHUP};

/*
 * Block the stop signals in this thread (and so in every thread created
 * later) and install a handler without SA_RESTART. *wait_mask receives the
 * mask to use while waiting for input: the old mask minus the stop signals.
 */
static void setup_signals(sigset_t *wait_mask)
{
    struct sigaction sa;
    sigset_t block;
    size_t i;

    sigemptyset(&block);
    for (i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++)
        sigaddset(&block, stop_signals[i]);
    pthread_sigmask(SIG_BLOCK, &block, wait_mask);
    for (i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++)
        sigdelset(wait_mask, stop_signals[i]);

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0; /* no SA_RESTART: interrupt pselect() */
    for (i = 0; i < sizeof stop_signals / sizeof stop_signals[0]; i++)
        sigaction(stop_signals[i], &sa, NULL);

    /* A closed stdout must not kill us before the lock file is removed. */
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);
}

/* A handler for one stdin line (without its '\n'); it may modify the line. */
typedef void (*line_fn)(void *ctx, char *line, size_t len);

/*
 * Read commands from stdin until EOF, *stop_requested or a stop signal. Lines
 * may be of any length; a last line without '\n' is still executed.
 */
static void command_loop(const sigset_t *wait_mask, const int *stop_requested, line_fn handle,
                         void *ctx)
{
    sbuf in = {0};
    char chunk[65536];
    size_t start = 0;

    while (!*stop_requested && !stop_signal) {
        fd_set rfds;
        ssize_t got;
        int r;

        FD_ZERO(&rfds);
        FD_SET(STDIN_FILENO, &rfds);
        r = pselect(STDIN_FILENO + 1, &rfds, NULL, NULL, NULL, wait_mask);
        if (r < 0) {
            if (errno == EINTR)
                continue; /* a signal: the loop condition decides */
            emit_error("stdin: select: %s", strerror(errno));
            break;
        }
        got = read(STDIN_FILENO, chunk, sizeof chunk);
        if (got < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            emit_error("stdin: read: %s", strerror(errno));
            break;
        }
        if (got == 0) { /* EOF: run an unterminated last line, then stop */
            if (in.len > start)
                handle(ctx, in.data + start, in.len - start);
            break;
        }
        sb_putn(&in, chunk, (size_t)got);
        for (;;) {
            char *nl = memchr(in.data + start, '\n', in.len - start);
            size_t len;
            if (nl == NULL)
                break;
            *nl = '\0';
            len = (size_t)(nl - (in.data + start));
            handle(ctx, in.data + start, len);
            start += len + 1;
            if (*stop_requested)
                break;
        }
        /* drop consumed bytes */
        if (start > 0) {
            memmove(in.data, in.data + start, in.len - start);
            in.len -= start;
            in.data[in.len] = '\0';
            start = 0;
        }
    }
    sb_free(&in);
}

static void ide_handle_line_cb(void *ctx, char *line, size_t len) { ide_handle_line(ctx, line, len); }

static void ide_command_loop(ide_demo *d, const sigset_t *wait_mask)
{
    command_loop(wait_mask, &d->stop_requested, ide_handle_line_cb, d);
}

/* Print the "ready" event; returns 0 if the companion's state can't be read. */
static int ide_emit_ready(ide_demo *d)
{
    uint16_t port = 0;
    char *lock = NULL, *env = NULL, *err = NULL;
    sbuf line = {0};

    if (!check_status("port", qc_companion_port(d->companion, &port, &err), &err))
        return 0;
    if (!check_status("lock file path", qc_companion_lock_file_path(d->companion, &lock, &err), &err))
        return 0;
    if (!check_status("terminal env", qc_companion_terminal_env_json(d->companion, &env, &err), &err)) {
        qc_string_free(lock);
        return 0;
    }
    sb_printf(&line, "{\"event\":\"ready\",\"port\":%u,\"lockFile\":", (unsigned)port);
    sb_json_str(&line, lock);
    /* env is a JSON object produced by the library: embed it verbatim. */
    sb_puts(&line, ",\"env\":");
    sb_puts(&line, env != NULL ? env : "{}");
    sb_putc(&line, '}');
    emit_line(&line);
    sb_free(&line);
    qc_string_free(lock);
    qc_string_free(env);
    return 1;
}

static void ide_usage(FILE *f)
{
    fputs("usage: " QCDEMO_NAME " ide --workspace DIR[:DIR...] [--ide-name NAME]\n"
          "\n"
          "Starts a Qwen Code IDE companion and prints JSON lines on stdout:\n"
          "  {\"event\":\"ready\",\"port\":N,\"lockFile\":\"...\",\"env\":{...}}\n"
          "  {\"event\":\"diff_opened\",\"filePath\":\"...\",\"newContent\":\"...\"}\n"
          "  {\"event\":\"diff_close_requested\",\"filePath\":\"...\"}\n"
          "  {\"event\":\"error\",\"message\":\"...\"}\n"
          "  {\"event\":\"stopped\"}\n"
          "Library log messages (warnings and errors) go to stderr.\n"
          "\n"
          "Commands, one per line on stdin (PATH is the rest of the line):\n"
          "  open PATH | focus PATH | close PATH   editor file events\n"
          "  cursor LINE CHAR                      cursor in the active file (1-based)\n"
          "  select TEXT                           selection in the active file (escapes \\n \\t \\\\;\n"
          "                                        no TEXT clears it)\n"
          "  context JSON                          replace the whole IdeContext\n"
          "  workspace DIR[:DIR...]                set the workspace roots\n"
          "  trust true|false                      workspace trust\n"
          "  accept PATH                           accept a diff with the proposed text\n"
          "  accept-from FILE PATH                 accept a diff with the text in FILE (no spaces)\n"
          "  reject PATH                           reject a diff\n"
          "  closed PATH                           the user closed a diff\n"
          "  stop                                  stop and exit\n"
          "closeDiff requests are answered with the diff's current text.\n"
          "EOF, SIGTERM, SIGINT and SIGHUP stop cleanly too (exit status 0).\n",
          f);
}

/* `--opt VALUE` or `--opt=VALUE`; advances *i past the value. */
static int take_option(int argc, char **argv, int *i, const char *name, const char **value)
{
    size_t n = strlen(name);
    const char *a = argv[*i];
    if (strncmp(a, name, n) != 0)
        return 0;
    if (a[n] == '=') {
        *value = a + n + 1;
        return 1;
    }
    if (a[n] != '\0')
        return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, QCDEMO_NAME ": %s needs a value\n", name);
        exit(2);
    }
    *value = argv[++*i];
    return 1;
}

static int subcmd_ide(int argc, char **argv)
{
    const char *workspace = NULL, *ide_name = NULL;
    ide_demo d;
    sbuf config = {0};
    sigset_t wait_mask;
    char *err = NULL;
    int i, rc = 0;

    for (i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            ide_usage(stdout);
            return 0;
        }
        if (take_option(argc, argv, &i, "--workspace", &workspace) ||
            take_option(argc, argv, &i, "--ide-name", &ide_name))
            continue;
        fprintf(stderr, QCDEMO_NAME " ide: unknown argument: %s\n", argv[i]);
        ide_usage(stderr);
        return 2;
    }
    if (workspace == NULL) {
        fputs(QCDEMO_NAME " ide: --workspace is required\n", stderr);
        ide_usage(stderr);
        return 2;
    }

    /* Before the library starts any thread. */
    setup_signals(&wait_mask);

    memset(&d, 0, sizeof d);
    pthread_mutex_init(&d.diffs.lock, NULL);

    sb_puts(&config, "{\"workspaceRoots\":");
    if (sb_json_roots(&config, workspace) == 0) {
        fputs(QCDEMO_NAME " ide: --workspace names no directory\n", stderr);
        sb_free(&config);
        pthread_mutex_destroy(&d.diffs.lock);
        return 2;
    }
    if (ide_name != NULL) {
        sb_puts(&config, ",\"ideName\":");
        sb_json_str(&config, ide_name);
    }
    sb_putc(&config, '}');

    if (!check_status("start", qc_companion_new(config.data, &d.companion, &err), &err)) {
        sb_free(&config);
        pthread_mutex_destroy(&d.diffs.lock);
        return 1;
    }
    sb_free(&config);

    /* user_data is &d, which outlives the companion: no free function. */
    if (!check_status("start", qc_companion_set_log_callback(d.companion, on_log, &d, NULL, 3, &err), &err) ||
        !check_status("start", qc_companion_set_open_diff_callback(d.companion, on_open_diff, &d, NULL, &err), &err) ||
        !check_status("start", qc_companion_set_close_diff_callback(d.companion, on_close_diff, &d, NULL, &err), &err) ||
        !check_status("start", qc_companion_start(d.companion, &err), &err) ||
        !ide_emit_ready(&d)) {
        rc = 1;
    } else {
        ide_command_loop(&d, &wait_mask);
        if (stop_signal)
            fprintf(stderr, QCDEMO_NAME ": signal %d, stopping\n", (int)stop_signal);
    }

    /* Clean stop: remove the lock file, then join the callback thread. */
    {
        qc_status st = qc_companion_stop(d.companion, &err);
        if (st == QC_NOT_RUNNING && rc != 0)
            qc_string_free(err); /* start failed: nothing to stop */
        else if (!check_status("stop", st, &err))
            rc = 1;
    }
    if (!check_status("free", qc_companion_free(d.companion), NULL))
        rc = 1;
    d.companion = NULL;
    diff_table_clear(&d.diffs);
    pthread_mutex_destroy(&d.diffs.lock);

    {
        sbuf line = {0};
        sb_puts(&line, "{\"event\":\"stopped\"}");
        emit_line(&line);
        sb_free(&line);
    }
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Reading the library's JSON                                                 */
/* ------------------------------------------------------------------------ */

/*
 * The library hands out JSON documents (compact, valid UTF-8). The demo reads
 * a few fields of them and embeds other values (a received frame) verbatim,
 * so it only needs to find values: a span is the raw text of one JSON value.
 * Every function here stays inside the given bytes, whatever they hold.
 */
typedef struct {
    const char *p;
    size_t n;
} jspan;

static jspan js_doc(const char *s)
{
    jspan j;
    j.p = s != NULL ? s : "";
    j.n = s != NULL ? strlen(s) : 0;
    return j;
}

static size_t js_ws(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

/* s[i] is '"': the index just past the closing quote, or 0 if unterminated. */
static size_t js_skip_string(const char *s, size_t n, size_t i)
{
    for (i++; i < n; i++) {
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return i + 1;
    }
    return 0;
}

/* The index just past the value that starts at s[i], or 0 if there is none. */
static size_t js_skip_value(const char *s, size_t n, size_t i)
{
    size_t depth = 0, j;

    if (i >= n)
        return 0;
    if (s[i] == '"')
        return js_skip_string(s, n, i);
    if (s[i] == '{' || s[i] == '[') {
        while (i < n) {
            char c = s[i];
            if (c == '"') {
                i = js_skip_string(s, n, i);
                if (i == 0)
                    return 0;
                continue;
            }
            if (c == '{' || c == '[') {
                depth++;
            } else if (c == '}' || c == ']') {
                if (--depth == 0)
                    return i + 1;
            }
            i++;
        }
        return 0;
    }
    for (j = i; j < n; j++)
        if (strchr(",}] \t\r\n", s[j]) != NULL) /* a NUL byte stops it too */
            break;
    return j > i ? j : 0;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Four hex digits at s (the caller checked that they are there). */
static long hex4(const char *s)
{
    long v = 0;
    int i, d;
    for (i = 0; i < 4; i++) {
        d = hex_digit(s[i]);
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

static void sb_put_utf8(sbuf *b, unsigned long cp)
{
    char u[4];
    if (cp < 0x80) {
        u[0] = (char)cp;
        sb_putn(b, u, 1);
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        sb_putn(b, u, 2);
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        sb_putn(b, u, 3);
    } else {
        u[0] = (char)(0xF0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        sb_putn(b, u, 4);
    }
}

/*
 * Decode the JSON string v into a new NUL-terminated UTF-8 string of *len
 * bytes (it may contain NULs); a lone surrogate becomes U+FFFD. NULL if v is
 * not a string. Free with free().
 */
static char *js_strn(jspan v, size_t *len)
{
    const char *s = v.p;
    size_t n = v.n, i, end;
    sbuf b = {0};

    if (n < 2 || s[0] != '"' || s[n - 1] != '"')
        return NULL;
    end = n - 1; /* the closing quote */
    sb_reserve(&b, n);
    for (i = 1; i < end; i++) {
        char c = s[i];
        long cp, lo;
        if (c != '\\') {
            sb_putc(&b, c);
            continue;
        }
        if (++i >= end)
            break;
        switch (s[i]) {
        case 'b': sb_putc(&b, '\b'); break;
        case 'f': sb_putc(&b, '\f'); break;
        case 'n': sb_putc(&b, '\n'); break;
        case 'r': sb_putc(&b, '\r'); break;
        case 't': sb_putc(&b, '\t'); break;
        case 'u':
            if (end - i <= 4 || (cp = hex4(s + i + 1)) < 0) {
                sb_put_utf8(&b, 0xFFFD);
                i = end;
                break;
            }
            i += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && end - i > 6 && s[i + 1] == '\\' && s[i + 2] == 'u' &&
                (lo = hex4(s + i + 3)) >= 0xDC00 && lo <= 0xDFFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                i += 6;
            } else if (cp >= 0xD800 && cp <= 0xDFFF) {
                cp = 0xFFFD;
            }
            sb_put_utf8(&b, (unsigned long)cp);
            break;
        default: sb_putc(&b, s[i]); break; /* \" \\ \/ */
        }
    }
    *len = b.len;
    return b.data;
}

static char *js_str(jspan v)
{
    size_t len;
    return js_strn(v, &len);
}

/* Whether the raw JSON string q[0..n) equals key. */
static int js_key_is(const char *q, size_t n, const char *key)
{
    size_t klen = strlen(key), len;
    jspan k;
    char *d;
    int eq;

    if (memchr(q, '\\', n) == NULL)
        return n == klen + 2 && memcmp(q + 1, key, klen) == 0;
    k.p = q;
    k.n = n;
    d = js_strn(k, &len);
    eq = d != NULL && len == klen && memcmp(d, key, klen) == 0;
    free(d);
    return eq;
}

/* The member `key` of the object obj (the first one, if repeated). */
static int js_get(jspan obj, const char *key, jspan *out)
{
    const char *s = obj.p;
    size_t n = obj.n, i = js_ws(s, n, 0);

    if (i >= n || s[i] != '{')
        return 0;
    i = js_ws(s, n, i + 1);
    while (i < n && s[i] == '"') {
        size_t ke = js_skip_string(s, n, i), vs, ve;
        int hit;
        if (ke == 0)
            return 0;
        hit = js_key_is(s + i, ke - i, key);
        i = js_ws(s, n, ke);
        if (i >= n || s[i] != ':')
            return 0;
        vs = js_ws(s, n, i + 1);
        ve = js_skip_value(s, n, vs);
        if (ve == 0)
            return 0;
        if (hit) {
            out->p = s + vs;
            out->n = ve - vs;
            return 1;
        }
        i = js_ws(s, n, ve);
        if (i >= n || s[i] != ',')
            return 0;
        i = js_ws(s, n, i + 1);
    }
    return 0;
}

/* The string member `key` of obj, decoded (NULL if absent or not a string). */
static char *js_get_str(jspan obj, const char *key)
{
    jspan v;
    return js_get(obj, key, &v) ? js_str(v) : NULL;
}

/* Iteration over the elements of a JSON array. */
typedef struct {
    const char *s;
    size_t n, i;
    int state; /* 0 not started, 1 inside, 2 done */
} jiter;

static void js_iter(jiter *it, jspan arr)
{
    it->s = arr.p;
    it->n = arr.n;
    it->i = 0;
    it->state = 0;
}

static int js_next(jiter *it, jspan *elem)
{
    size_t i, e;

    if (it->state == 2)
        return 0;
    if (it->state == 0) {
        i = js_ws(it->s, it->n, 0);
        if (i >= it->n || it->s[i] != '[') {
            it->state = 2;
            return 0;
        }
        i = js_ws(it->s, it->n, i + 1);
        it->state = 1;
    } else {
        i = js_ws(it->s, it->n, it->i);
        if (i >= it->n || it->s[i] != ',') {
            it->state = 2;
            return 0;
        }
        i = js_ws(it->s, it->n, i + 1);
    }
    e = js_skip_value(it->s, it->n, i);
    if (e == 0 || it->s[i] == ']') {
        it->state = 2;
        return 0;
    }
    elem->p = it->s + i;
    elem->n = e - i;
    it->i = e;
    return 1;
}

/* Append ,"name":<raw value of obj's member key>; nothing if there is none. */
static int sb_copy_member(sbuf *b, const char *name, jspan obj, const char *key)
{
    jspan v;
    if (!js_get(obj, key, &v))
        return 0;
    sb_putc(b, ',');
    sb_json_str(b, name);
    sb_putc(b, ':');
    sb_putn(b, v.p, v.n);
    return 1;
}

/* ------------------------------------------------------------------------ */
/* The `sessions` subcommand: cross-session messaging                         */
/* ------------------------------------------------------------------------ */

extern char **environ;

#define MESSAGING_SOCKET_ENV "QWEN_CODE_MESSAGING_SOCKET"
#define MESSAGING_TOKEN_ENV "QWEN_CODE_MESSAGING_TOKEN"

typedef struct {
    qc_participant *p;
    char *session_id; /* our registered session */
    int stop_requested;
    int one_shot; /* `sessions send`: nothing is printed after a final receipt */
    const sigset_t *wait_mask;
    /* Under out_lock: */
    int deferring; /* a send (or registration) is under way: events wait in `deferred` */
    int finished;  /* print no more events */
    sbuf deferred;
    int wake_fd[2]; /* one-shot: a byte is written when a final receipt arrived */
    /* Touched by the callback thread only (and after the participant is freed): */
    char **held_ids; /* held messages already reported */
    size_t held_n;
} sess_demo;

/* Print an event from a callback: now, or after the line of the send (or the
 * ready event) the main thread is producing, so that it comes first. */
static void sess_emit(sess_demo *d, const sbuf *line)
{
    pthread_mutex_lock(&out_lock);
    if (!d->finished) {
        if (d->deferring) {
            sb_putn(&d->deferred, line->data, line->len);
            sb_putc(&d->deferred, '\n');
        } else {
            write_line_locked(line);
        }
    }
    pthread_mutex_unlock(&out_lock);
}

static void sess_defer_begin(sess_demo *d)
{
    pthread_mutex_lock(&out_lock);
    d->deferring = 1;
    pthread_mutex_unlock(&out_lock);
}

/* Print `line` (if not NULL), then whatever the callbacks printed meanwhile. */
static void sess_defer_end(sess_demo *d, const sbuf *line)
{
    pthread_mutex_lock(&out_lock);
    if (line != NULL)
        write_line_locked(line);
    if (d->deferred.len > 0) {
        fwrite(d->deferred.data, 1, d->deferred.len, stdout);
        fflush(stdout);
        d->deferred.len = 0;
        d->deferred.data[0] = '\0';
    }
    d->deferring = 0;
    pthread_mutex_unlock(&out_lock);
}

/* A delivered message: {"event":"message","origin","controller"?,"frame"}. */
static void sess_on_message(void *user_data, const char *json)
{
    sess_demo *d = user_data;
    jspan doc = js_doc(json);
    sbuf line = {0};

    sb_puts(&line, "{\"event\":\"message\"");
    sb_copy_member(&line, "origin", doc, "origin");
    sb_copy_member(&line, "controller", doc, "controllerLabel");
    sb_copy_member(&line, "frame", doc, "frame");
    sb_putc(&line, '}');
    sess_emit(d, &line);
    sb_free(&line);
}

/* The hold buffer changed: one "held" event per message not reported yet. */
static void sess_on_held(void *user_data, const char *json)
{
    sess_demo *d = user_data;
    char **now = NULL;
    size_t now_n = 0, i;
    jiter it;
    jspan e;

    js_iter(&it, js_doc(json));
    while (js_next(&it, &e)) {
        char *id = js_get_str(e, "msgId");
        int known = 0;
        if (id == NULL)
            continue;
        for (i = 0; i < d->held_n && !known; i++)
            known = strcmp(d->held_ids[i], id) == 0;
        if (!known) {
            sbuf line = {0};
            sb_puts(&line, "{\"event\":\"held\"");
            sb_copy_member(&line, "msgId", e, "msgId");
            sb_copy_member(&line, "sessionId", e, "sessionId");
            sb_copy_member(&line, "origin", e, "origin");
            sb_copy_member(&line, "controller", e, "controllerLabel");
            sb_copy_member(&line, "cause", e, "cause");
            sb_copy_member(&line, "heldAt", e, "heldAt");
            sb_copy_member(&line, "expiresAt", e, "expiresAt");
            sb_copy_member(&line, "frame", e, "frame");
            sb_putc(&line, '}');
            sess_emit(d, &line);
            sb_free(&line);
        }
        now = xrealloc(now, (now_n + 1) * sizeof *now);
        now[now_n++] = id;
    }
    for (i = 0; i < d->held_n; i++)
        free(d->held_ids[i]);
    free(d->held_ids);
    d->held_ids = now;
    d->held_n = now_n;
}

/* A transition of a message we sent (only receipts on connections that
 * proved our own token reach this callback). */
static void sess_on_receipt(void *user_data, const char *json)
{
    sess_demo *d = user_data;
    jspan doc = js_doc(json);
    sbuf line = {0};
    char *status = js_get_str(doc, "status");
    int final = status != NULL && strcmp(status, "pending") != 0 && strcmp(status, "held") != 0;

    free(status);
    sb_puts(&line, "{\"event\":\"receipt\"");
    sb_copy_member(&line, "msgId", doc, "msgId");
    sb_copy_member(&line, "status", doc, "status");
    sb_copy_member(&line, "previous", doc, "previous");
    sb_copy_member(&line, "frame", doc, "frame");
    sb_putc(&line, '}');
    sess_emit(d, &line);
    sb_free(&line);
    if (final && d->one_shot) {
        pthread_mutex_lock(&out_lock);
        d->finished = 1;
        pthread_mutex_unlock(&out_lock);
        if (write(d->wake_fd[1], "x", 1) < 0) {
            /* the pipe is full: the main thread is being woken anyway */
        }
    }
}

/* Print a failure of a non-JSON command (ps) on stderr. */
static int report_failure(const char *what, qc_status st, char **errp)
{
    if (st == QC_OK)
        return 1;
    fprintf(stderr, QCDEMO_NAME " sessions %s: %s: %s\n", what, qc_status_name(st),
            *errp != NULL ? *errp : "(no message)");
    qc_string_free(*errp);
    *errp = NULL;
    return 0;
}

/*
 * Inside a process started by a Qwen session (QWEN_CODE_MESSAGING_SOCKET and
 * _TOKEN set), a message to that session goes with the messaging token, so
 * that it arrives as "own-process". When ADDRESS resolves to a live record
 * whose inbox is that socket, returns its session id (free with free()).
 */
static char *parent_session_for(qc_participant *p, const char *address)
{
    const char *sock = getenv(MESSAGING_SOCKET_ENV), *tok = getenv(MESSAGING_TOKEN_ENV);
    char *peer = NULL, *list = NULL, *err = NULL, *sid = NULL, *found = NULL;
    jiter it;
    jspan rec;

    if (sock == NULL || sock[0] == '\0' || tok == NULL || tok[0] == '\0')
        return NULL;
    if (qc_participant_resolve_json(p, address, NULL, &peer, &err) != QC_OK) {
        qc_string_free(err); /* the ordinary send reports it */
        return NULL;
    }
    sid = js_get_str(js_doc(peer), "sessionId");
    qc_string_free(peer);
    if (sid == NULL)
        return NULL;
    if (qc_participant_list_json(p, &list, &err) != QC_OK) {
        qc_string_free(err);
        free(sid);
        return NULL;
    }
    js_iter(&it, js_doc(list));
    while (found == NULL && js_next(&it, &rec)) {
        char *rs = js_get_str(rec, "sessionId"), *ip = js_get_str(rec, "ipcPath");
        if (rs != NULL && ip != NULL && strcmp(rs, sid) == 0 && strcmp(ip, sock) == 0)
            found = sid;
        free(rs);
        free(ip);
    }
    qc_string_free(list);
    if (found == NULL)
        free(sid);
    return found;
}

/*
 * Send TEXT to ADDRESS and print {"event":"sent",...} or
 * {"event":"send_failed",...}; receipts that arrive meanwhile are printed
 * after it. Returns 1 when the message was sent.
 */
static int sess_send(sess_demo *d, const char *address, const char *text, size_t text_len,
                     const char *from_mode, int controller)
{
    sbuf opts = {0}, line = {0};
    char *parent_sid = controller ? NULL : parent_session_for(d->p, address);
    char *out = NULL, *err = NULL;
    qc_status st;

    if (parent_sid != NULL) {
        sb_puts(&opts, "{\"toSessionId\":");
        sb_json_str(&opts, parent_sid);
    } else {
        sb_puts(&opts, "{\"to\":");
        sb_json_str(&opts, address);
        if (controller)
            sb_puts(&opts, ",\"controller\":true");
    }
    sb_puts(&opts, ",\"content\":");
    sb_json_strn(&opts, text, text_len);
    if (from_mode != NULL) {
        sb_puts(&opts, ",\"fromMode\":");
        sb_json_str(&opts, from_mode);
    }
    sb_putc(&opts, '}');

    sess_defer_begin(d);
    if (parent_sid != NULL)
        st = qc_participant_send_to_parent(d->p, opts.data, &out, &err);
    else
        st = qc_participant_send(d->p, opts.data, &out, &err);
    if (st == QC_OK) {
        jspan doc = js_doc(out);
        sb_puts(&line, "{\"event\":\"sent\"");
        sb_copy_member(&line, "msgId", doc, "msgId");
        sb_puts(&line, ",\"to\":");
        sb_json_str(&line, address);
        sb_copy_member(&line, "address", doc, "address");
        sb_copy_member(&line, "toSessionId", doc, "toSessionId");
        sb_copy_member(&line, "confirmed", doc, "confirmed");
        if (parent_sid != NULL)
            sb_puts(&line, ",\"parent\":true");
        sb_putc(&line, '}');
    } else {
        sb_puts(&line, "{\"event\":\"send_failed\",\"to\":");
        sb_json_str(&line, address);
        sb_puts(&line, ",\"status\":");
        sb_json_str(&line, qc_status_name(st));
        sb_puts(&line, ",\"error\":");
        sb_json_str(&line, err != NULL ? err : "(no message)");
        sb_putc(&line, '}');
    }
    sess_defer_end(d, &line);
    qc_string_free(out);
    qc_string_free(err);
    free(parent_sid);
    sb_free(&opts);
    sb_free(&line);
    return st == QC_OK;
}

/* Creates the participant, sets the callbacks and registers one session. */
static int sess_start(sess_demo *d, const char *config, const char *name, int with_inbound)
{
    char *err = NULL, *info = NULL;
    sbuf opts = {0};
    const char *level = getenv("QCDEMO_LOG_LEVEL");
    uint32_t max_level = 3;
    int ok;

    if (level != NULL && level[0] >= '1' && level[0] <= '5' && level[1] == '\0')
        max_level = (uint32_t)(level[0] - '0');
    if (!check_status("start", qc_participant_new(config, &d->p, &err), &err))
        return 0;
    /* user_data is d, which outlives the participant: no free function. */
    if (!check_status("start", qc_participant_set_log_callback(d->p, on_log, d, NULL, max_level, &err), &err) ||
        !check_status("start", qc_participant_set_receipt_callback(d->p, sess_on_receipt, d, NULL, &err), &err))
        return 0;
    if (with_inbound &&
        (!check_status("start", qc_participant_set_message_callback(d->p, sess_on_message, d, NULL, &err), &err) ||
         !check_status("start", qc_participant_set_held_callback(d->p, sess_on_held, d, NULL, &err), &err)))
        return 0;
    sb_putc(&opts, '{');
    if (name != NULL) {
        sb_puts(&opts, "\"name\":");
        sb_json_str(&opts, name);
    }
    sb_putc(&opts, '}');
    ok = check_status("register", qc_participant_register(d->p, opts.data, &info, &err), &err);
    sb_free(&opts);
    if (ok) {
        jspan doc = js_doc(info);
        d->session_id = js_get_str(doc, "sessionId");
        if (with_inbound) {
            sbuf line = {0};
            sb_puts(&line, "{\"event\":\"ready\"");
            sb_copy_member(&line, "record", doc, "recordPath");
            sb_copy_member(&line, "sessionId", doc, "sessionId");
            sb_copy_member(&line, "ref", doc, "ref");
            sb_copy_member(&line, "name", doc, "name");
            sb_copy_member(&line, "ipcPath", doc, "ipcPath");
            sb_putc(&line, '}');
            sess_defer_end(d, &line); /* events that came already follow it */
            sb_free(&line);
        }
        qc_string_free(info);
        ok = d->session_id != NULL;
    }
    return ok;
}

/* Unregister (held and queued messages settle as `expired`, the record and
 * the socket go) and release everything. */
static int sess_stop(sess_demo *d)
{
    size_t i;
    int ok = 1;

    if (d->p != NULL && !check_status("stop", qc_participant_free(d->p), NULL))
        ok = 0;
    d->p = NULL;
    for (i = 0; i < d->held_n; i++)
        free(d->held_ids[i]);
    free(d->held_ids);
    d->held_ids = NULL;
    d->held_n = 0;
    free(d->session_id);
    d->session_id = NULL;
    sb_free(&d->deferred);
    return ok;
}

/* ---- `sessions listen`: stdin commands */

typedef void (*sess_cmd_fn)(sess_demo *d, const char *verb, char *arg);

static void sess_cmd_send(sess_demo *d, const char *verb, char *arg)
{
    static const char usage[] = "send [--from-mode prompting|bypass] ADDRESS TEXT";
    const char *mode = NULL;
    char *sp;

    if (strncmp(arg, "--from-mode", 11) == 0 && (arg[11] == ' ' || arg[11] == '=')) {
        mode = arg + 12;
        sp = strchr(mode, ' ');
        if (sp == NULL || sp == mode) {
            emit_error("%s: --from-mode needs a value (usage: %s)", verb, usage);
            return;
        }
        *sp = '\0';
        arg = sp + 1;
    }
    sp = strchr(arg, ' ');
    if (arg[0] == '\0' || sp == NULL || sp == arg || sp[1] == '\0') {
        emit_error("%s: missing argument (usage: %s)", verb, usage);
        return;
    }
    *sp = '\0';
    sess_send(d, arg, sp + 1, strlen(sp + 1), mode, 0);
}

static void sess_cmd_release(sess_demo *d, const char *verb, char *arg)
{
    char *err = NULL;
    if (require_arg(verb, arg, "MSGID"))
        check_status(verb, qc_participant_release(d->p, arg, &err), &err);
}

static void sess_cmd_deny(sess_demo *d, const char *verb, char *arg)
{
    char *err = NULL;
    if (require_arg(verb, arg, "MSGID"))
        check_status(verb, qc_participant_deny(d->p, arg, &err), &err);
}

/*
 * run COMMAND: run `/bin/sh -c COMMAND` as a process this session started
 * (QWEN_CODE_MESSAGING_SOCKET/_TOKEN set to our inbox and child token; its
 * messages to us arrive as "own-process"), stdin from /dev/null and stdout
 * to our stderr (redirect inside COMMAND to keep it), and wait for it.
 */
static void sess_cmd_run(sess_demo *d, const char *verb, char *arg)
{
    char *env_json = NULL, *err = NULL, *sock = NULL, *tok = NULL;
    char **envp = NULL;
    char *child_argv[4];
    sbuf e_sock = {0}, e_tok = {0}, line = {0};
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    sigset_t dflt;
    size_t n = 0, i, k = 0;
    pid_t pid;
    int rc, status = 0;

    if (!require_arg(verb, arg, "COMMAND"))
        return;
    if (!check_status(verb, qc_participant_child_env_json(d->p, d->session_id, &env_json, &err), &err))
        return;
    sock = js_get_str(js_doc(env_json), MESSAGING_SOCKET_ENV);
    tok = js_get_str(js_doc(env_json), MESSAGING_TOKEN_ENV);
    qc_string_free(env_json);
    if (sock == NULL || tok == NULL) {
        emit_error("%s: the library gave no child environment", verb);
        free(sock);
        free(tok);
        return;
    }
    sb_printf(&e_sock, "%s=%s", MESSAGING_SOCKET_ENV, sock);
    sb_printf(&e_tok, "%s=%s", MESSAGING_TOKEN_ENV, tok);
    free(sock);
    free(tok);
    while (environ[n] != NULL)
        n++;
    envp = xrealloc(NULL, (n + 3) * sizeof *envp);
    for (i = 0; i < n; i++)
        if (strncmp(environ[i], MESSAGING_SOCKET_ENV "=", sizeof MESSAGING_SOCKET_ENV) != 0 &&
            strncmp(environ[i], MESSAGING_TOKEN_ENV "=", sizeof MESSAGING_TOKEN_ENV) != 0)
            envp[k++] = environ[i];
    envp[k++] = e_sock.data;
    envp[k++] = e_tok.data;
    envp[k] = NULL;

    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, STDERR_FILENO, STDOUT_FILENO);
    posix_spawnattr_init(&attr);
    /* The child starts with the signals we block unblocked and SIGPIPE at its default. */
    sigemptyset(&dflt);
    sigaddset(&dflt, SIGPIPE);
    sigaddset(&dflt, SIGTERM);
    sigaddset(&dflt, SIGINT);
    sigaddset(&dflt, SIGHUP);
    posix_spawnattr_setsigdefault(&attr, &dflt);
    posix_spawnattr_setsigmask(&attr, d->wait_mask);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
    child_argv[0] = "sh";
    child_argv[1] = "-c";
    child_argv[2] = arg;
    child_argv[3] = NULL;
    rc = posix_spawn(&pid, "/bin/sh", &fa, &attr, child_argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    free(envp);
    /* The token is in these buffers: clear them before freeing. */
    memset(e_tok.data, 0, e_tok.len);
    sb_free(&e_sock);
    sb_free(&e_tok);
    if (rc != 0) {
        emit_error("%s: cannot start /bin/sh: %s", verb, strerror(rc));
        return;
    }
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            emit_error("%s: waitpid: %s", verb, strerror(errno));
            return;
        }
    }
    sb_puts(&line, "{\"event\":\"ran\",\"command\":");
    sb_json_str(&line, arg);
    if (WIFEXITED(status))
        sb_printf(&line, ",\"exitCode\":%d}", WEXITSTATUS(status));
    else
        sb_printf(&line, ",\"signal\":%d}", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    emit_line(&line);
    sb_free(&line);
}

static void sess_cmd_stop(sess_demo *d, const char *verb, char *arg)
{
    (void)verb;
    (void)arg;
    d->stop_requested = 1;
}

static const struct {
    const char *verb;
    sess_cmd_fn fn;
} sess_commands[] = {
    {"send", sess_cmd_send},
    {"release", sess_cmd_release},
    {"deny", sess_cmd_deny},
    {"run", sess_cmd_run},
    {"stop", sess_cmd_stop},
};

static void sess_handle_line(void *ctx, char *line, size_t len)
{
    sess_demo *d = ctx;
    char *verb, *arg;
    size_t i;

    if (!split_command(line, len, &verb, &arg))
        return;
    for (i = 0; i < sizeof sess_commands / sizeof sess_commands[0]; i++) {
        if (strcmp(verb, sess_commands[i].verb) == 0) {
            sess_commands[i].fn(d, verb, arg);
            return;
        }
    }
    emit_error("unknown command: %s", verb);
}

/* ---- usage */

static void sessions_usage(FILE *f)
{
    fputs("usage: " QCDEMO_NAME " sessions ps [--json]\n"
          "       " QCDEMO_NAME " sessions listen [--name N] [--policy accept|hold|refuse]\n"
          "                                [--mode prompting|bypass]\n"
          "       " QCDEMO_NAME " sessions send ADDRESS TEXT [--from-mode prompting|bypass]\n"
          "                              [--controller-token T] [--wait SECONDS] [--name N]\n"
          "\n"
          "Cross-session messaging with Qwen Code sessions (and other participants) in\n"
          "$QWEN_HOME (default ~/.qwen); sockets go under $XDG_RUNTIME_DIR or $TMPDIR.\n"
          "ADDRESS is a session name, [ref] or a bare ref (`sessions ps` shows them).\n"
          "\n"
          "ps       the live sessions: a table, or with --json one record per line with\n"
          "         the fields of `qwen sessions ps --json`.\n"
          "\n"
          "listen   registers a session and prints JSON lines:\n"
          "  {\"event\":\"ready\",\"record\":PATH,\"sessionId\",\"ref\",\"name\",\"ipcPath\"}\n"
          "  {\"event\":\"message\",\"origin\":\"peer|own-process|controller\",\"controller\"?,\n"
          "   \"frame\":{...the user frame as received...}}\n"
          "  {\"event\":\"held\",\"msgId\",\"sessionId\",\"origin\",\"controller\"?,\"cause\",\"heldAt\",\n"
          "   \"expiresAt\"?,\"frame\"}                  a message waits for release/deny\n"
          "  {\"event\":\"sent\",\"msgId\",\"to\",\"address\",\"toSessionId\",\"confirmed\",\"parent\"?}\n"
          "  {\"event\":\"send_failed\",\"to\",\"status\",\"error\"}\n"
          "  {\"event\":\"receipt\",\"msgId\",\"status\",\"previous\",\"frame\":{...control frame...}}\n"
          "  {\"event\":\"ran\",\"command\",\"exitCode\"|\"signal\"}\n"
          "  {\"event\":\"error\",\"message\"}   {\"event\":\"stopped\"}\n"
          "  --policy accept delivers everything, hold holds everything, refuse refuses\n"
          "  everything; without it a peer's message is delivered when its fromMode\n"
          "  equals --mode (our review class, default prompting) and held otherwise.\n"
          "  Commands on stdin, one per line:\n"
          "    send [--from-mode M] ADDRESS TEXT   ADDRESS is one word; TEXT the rest\n"
          "    release MSGID | deny MSGID          decide on a held message\n"
          "    run COMMAND                         run /bin/sh -c COMMAND, and wait for it,\n"
          "                                        as a process this session started (its\n"
          "                                        messages to us are own-process); its\n"
          "                                        stdout goes to our stderr\n"
          "    stop\n"
          "  EOF, stop, SIGTERM, SIGINT and SIGHUP unregister cleanly (held messages\n"
          "  settle as expired) and exit 0.\n"
          "\n"
          "send     registers its own session, sends one message, prints the sent (or\n"
          "         send_failed) event and each receipt until a final state (held is\n"
          "         not final) or --wait SECONDS (default 30) ends, then unregisters.\n"
          "         Exit status 0 when sent, 1 when not. --controller-token T presents T\n"
          "         (from `qwen sessions controllers add`) as given. In a process started\n"
          "         by a Qwen session (QWEN_CODE_MESSAGING_SOCKET/_TOKEN set), a message\n"
          "         to that session goes with the messaging token (\"parent\":true).\n"
          "\n"
          "QCDEMO_LOG_LEVEL=1..5 sets the library log level on stderr (default 3).\n",
          f);
}

static int parse_wait(const char *s, double *out)
{
    char *end;
    double v;
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= 0) || v > 86400)
        return 0;
    *out = v;
    return 1;
}

/* ---- ps */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* The code point of the well-formed UTF-8 sequence s[0..len). */
static unsigned long utf8_cp(const unsigned char *s, size_t len)
{
    unsigned long cp;
    size_t i;
    if (len == 1)
        return s[0];
    cp = s[0] & (len == 2 ? 0x1F : len == 3 ? 0x0F : 0x07);
    for (i = 1; i < len; i++)
        cp = (cp << 6) | (s[i] & 0x3F);
    return cp;
}

/*
 * Append text for a terminal cell of `width` columns (counted as code points):
 * control characters (C0, DEL, C1) and bidi overrides removed, cut to
 * width-2 with an ellipsis, padded with spaces.
 */
static void sb_cell(sbuf *b, const char *text, size_t n, size_t width, int last)
{
    const unsigned char *p = (const unsigned char *)text;
    size_t i = 0, cps = 0, total = 0, limit;
    sbuf clean = {0};

    while (i < n) {
        size_t len = utf8_seq_len(p + i, n - i);
        unsigned long cp;
        if (len == 0) {
            sb_puts(&clean, "\xEF\xBF\xBD");
            total++;
            i++;
            continue;
        }
        cp = utf8_cp(p + i, len);
        if (!(cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || (cp >= 0x202A && cp <= 0x202E) ||
              (cp >= 0x2066 && cp <= 0x2069))) {
            sb_putn(&clean, text + i, len);
            total++;
        }
        i += len;
    }
    limit = last || width < 3 ? total : width - 2;
    p = (const unsigned char *)(clean.data != NULL ? clean.data : "");
    for (i = 0; i < clean.len && (total <= limit || cps < limit - 1); cps++) {
        size_t len = utf8_seq_len(p + i, clean.len - i);
        if (len == 0)
            len = 1; /* cannot happen: `clean` holds well-formed UTF-8 only */
        sb_putn(b, clean.data + i, len);
        i += len;
    }
    if (total > limit) {
        sb_puts(b, "\xE2\x80\xA6"); /* … */
        cps++;
    }
    if (!last)
        for (; cps < width; cps++)
            sb_putc(b, ' ');
    sb_free(&clean);
}

static void sb_cell_str(sbuf *b, const char *s, size_t width)
{
    sb_cell(b, s, strlen(s), width, 0);
}

static int sessions_ps(int argc, char **argv)
{
    /* The fields of `qwen sessions ps --json`, in its order. */
    static const char *const fields[] = {"schemaVersion", "pid",  "procStart",   "pidNs",
                                         "sessionId",     "cwd",  "name",        "startedAt",
                                         "qwenVersion",   "kind", "ipcPath"};
    qc_participant *p = NULL;
    char *list = NULL, *err = NULL;
    int json = 0, i, rows = 0;
    double now;
    jiter it;
    jspan rec;
    sbuf out = {0};

    for (i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            sessions_usage(stdout);
            return 0;
        } else {
            fprintf(stderr, QCDEMO_NAME " sessions ps: unknown argument: %s\n", argv[i]);
            return 2;
        }
    }
    if (!report_failure("ps", qc_participant_new(NULL, &p, &err), &err))
        return 1;
    if (!report_failure("ps", qc_participant_list_json(p, &list, &err), &err)) {
        qc_participant_free(p);
        return 1;
    }
    now = now_ms();
    js_iter(&it, js_doc(list));
    while (js_next(&it, &rec)) {
        rows++;
        if (json) {
            size_t k;
            int first = 1;
            sb_putc(&out, '{');
            for (k = 0; k < sizeof fields / sizeof fields[0]; k++) {
                jspan v;
                if (!js_get(rec, fields[k], &v))
                    continue;
                if (!first)
                    sb_putc(&out, ',');
                first = 0;
                sb_json_str(&out, fields[k]);
                sb_putc(&out, ':');
                sb_putn(&out, v.p, v.n);
            }
            sb_puts(&out, "}\n");
        } else {
            char *name = NULL, *ref = js_get_str(rec, "ref"), *kind = js_get_str(rec, "kind");
            char *cwd = NULL, *num;
            size_t name_len = 0, cwd_len = 0;
            jspan v;
            double started = 0, age;
            long secs;
            char agebuf[32];

            if (rows == 1)
                sb_puts(&out, "NAME                  REF     KIND      PID      AGE       DIRECTORY\n");
            if (js_get(rec, "name", &v))
                name = js_strn(v, &name_len);
            if (js_get(rec, "cwd", &v))
                cwd = js_strn(v, &cwd_len);
            sb_cell(&out, name != NULL ? name : "", name_len, 22, 0);
            sb_cell_str(&out, ref != NULL ? ref : "", 8);
            sb_cell_str(&out, kind != NULL && kind[0] != '\0' ? kind : "tui", 10);
            if (js_get(rec, "pid", &v)) {
                num = xmemdup(v.p, v.n);
                sb_cell_str(&out, num, 9);
                free(num);
            } else {
                sb_cell_str(&out, "?", 9);
            }
            if (js_get(rec, "startedAt", &v)) {
                num = xmemdup(v.p, v.n);
                started = strtod(num, NULL);
                free(num);
            }
            age = now - started;
            secs = age > 0 ? (long)(age / 1000) : 0;
            if (secs < 60)
                snprintf(agebuf, sizeof agebuf, "%lds", secs);
            else if (secs < 3600)
                snprintf(agebuf, sizeof agebuf, "%ldm", secs / 60);
            else if (secs < 86400)
                snprintf(agebuf, sizeof agebuf, "%ldh", secs / 3600);
            else
                snprintf(agebuf, sizeof agebuf, "%ldd", secs / 86400);
            sb_cell_str(&out, agebuf, 10);
            sb_cell(&out, cwd != NULL ? cwd : "", cwd_len, 0, 1);
            sb_putc(&out, '\n');
            free(name);
            free(ref);
            free(kind);
            free(cwd);
        }
    }
    if (!json && rows == 0)
        sb_puts(&out, "No Qwen Code sessions are registered right now.\n");
    if (out.len > 0)
        fwrite(out.data, 1, out.len, stdout);
    fflush(stdout);
    sb_free(&out);
    qc_string_free(list);
    qc_participant_free(p);
    return 0;
}

/* ---- listen */

static int sessions_listen(int argc, char **argv)
{
    const char *name = NULL, *policy = NULL, *mode = NULL;
    sess_demo d;
    sbuf config = {0};
    sigset_t wait_mask;
    int i, rc = 0;

    for (i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            sessions_usage(stdout);
            return 0;
        }
        if (take_option(argc, argv, &i, "--name", &name) || take_option(argc, argv, &i, "--policy", &policy) ||
            take_option(argc, argv, &i, "--mode", &mode))
            continue;
        fprintf(stderr, QCDEMO_NAME " sessions listen: unknown argument: %s\n", argv[i]);
        sessions_usage(stderr);
        return 2;
    }
    if (policy != NULL && strcmp(policy, "accept") != 0 && strcmp(policy, "hold") != 0 &&
        strcmp(policy, "refuse") != 0) {
        fprintf(stderr, QCDEMO_NAME " sessions listen: --policy is accept, hold or refuse\n");
        return 2;
    }
    if (mode != NULL && strcmp(mode, "prompting") != 0 && strcmp(mode, "bypass") != 0) {
        fprintf(stderr, QCDEMO_NAME " sessions listen: --mode is prompting or bypass\n");
        return 2;
    }

    /* Before the library starts any thread. */
    setup_signals(&wait_mask);
    memset(&d, 0, sizeof d);
    d.wait_mask = &wait_mask;
    d.wake_fd[0] = d.wake_fd[1] = -1;

    sb_puts(&config, "{\"reviewClass\":");
    sb_json_str(&config, mode != NULL ? mode : "prompting");
    if (policy != NULL) {
        sb_puts(&config, ",\"inboundPolicy\":");
        sb_json_str(&config, policy);
    }
    sb_putc(&config, '}');

    /* Events of messages that arrive during registration follow "ready". */
    sess_defer_begin(&d);
    if (!sess_start(&d, config.data, name, 1)) {
        rc = 1;
        sess_defer_end(&d, NULL);
    } else {
        command_loop(&wait_mask, &d.stop_requested, sess_handle_line, &d);
        if (stop_signal)
            fprintf(stderr, QCDEMO_NAME ": signal %d, stopping\n", (int)stop_signal);
    }
    sb_free(&config);
    if (!sess_stop(&d))
        rc = 1;
    {
        sbuf line = {0};
        sb_puts(&line, "{\"event\":\"stopped\"}");
        emit_line(&line);
        sb_free(&line);
    }
    return rc;
}

/* ---- send */

static int sessions_send(int argc, char **argv)
{
    const char *from_mode = NULL, *token = NULL, *wait_arg = NULL, *name = NULL;
    const char *address = NULL;
    sbuf text = {0}, config = {0};
    int i, ntext = 0, rest = 0, sent = 0, ok = 1;
    double wait_s = 30;
    sess_demo d;
    sigset_t wait_mask;
    struct timespec deadline;

    for (i = 3; i < argc; i++) {
        if (!rest && strcmp(argv[i], "--") == 0) {
            rest = 1;
            continue;
        }
        if (!rest && strncmp(argv[i], "--", 2) == 0) {
            if (strcmp(argv[i], "--help") == 0) {
                sessions_usage(stdout);
                return 0;
            }
            if (take_option(argc, argv, &i, "--from-mode", &from_mode) ||
                take_option(argc, argv, &i, "--controller-token", &token) ||
                take_option(argc, argv, &i, "--wait", &wait_arg) || take_option(argc, argv, &i, "--name", &name))
                continue;
            fprintf(stderr, QCDEMO_NAME " sessions send: unknown option: %s\n", argv[i]);
            sessions_usage(stderr);
            return 2;
        }
        if (address == NULL) {
            address = argv[i];
        } else {
            if (ntext++ > 0)
                sb_putc(&text, ' ');
            sb_puts(&text, argv[i]);
        }
    }
    if (address == NULL || ntext == 0) {
        fputs(QCDEMO_NAME " sessions send: ADDRESS and TEXT are required\n", stderr);
        sessions_usage(stderr);
        sb_free(&text);
        return 2;
    }
    if (token != NULL && token[0] == '\0') {
        fputs(QCDEMO_NAME " sessions send: --controller-token is empty\n", stderr);
        sb_free(&text);
        return 2;
    }
    if (wait_arg != NULL && !parse_wait(wait_arg, &wait_s)) {
        fputs(QCDEMO_NAME " sessions send: --wait takes a number of seconds (0 to 86400)\n", stderr);
        sb_free(&text);
        return 2;
    }

    setup_signals(&wait_mask);
    memset(&d, 0, sizeof d);
    d.wait_mask = &wait_mask;
    d.one_shot = 1;
    if (pipe(d.wake_fd) != 0) {
        emit_error("pipe: %s", strerror(errno));
        sb_free(&text);
        return 1;
    }
    for (i = 0; i < 2; i++) {
        fcntl(d.wake_fd[i], F_SETFD, FD_CLOEXEC);
        fcntl(d.wake_fd[i], F_SETFL, fcntl(d.wake_fd[i], F_GETFL) | O_NONBLOCK);
    }

    /* Nobody reads this session's inbox: messages to it are refused. */
    sb_puts(&config, "{\"inboundPolicy\":\"refuse\"");
    if (token != NULL) {
        sb_puts(&config, ",\"controllerToken\":");
        sb_json_str(&config, token);
    }
    sb_putc(&config, '}');

    if (!sess_start(&d, config.data, name, 0)) {
        ok = 0;
    } else {
        sent = sess_send(&d, address, text.data, text.len, from_mode, token != NULL);
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += (time_t)wait_s;
        deadline.tv_nsec += (long)((wait_s - (double)(time_t)wait_s) * 1e9);
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
        while (sent && !stop_signal) {
            struct timespec now, left;
            fd_set rfds;
            char buf[64];
            int finished;

            pthread_mutex_lock(&out_lock);
            finished = d.finished;
            pthread_mutex_unlock(&out_lock);
            if (finished)
                break;
            clock_gettime(CLOCK_MONOTONIC, &now);
            left.tv_sec = deadline.tv_sec - now.tv_sec;
            left.tv_nsec = deadline.tv_nsec - now.tv_nsec;
            if (left.tv_nsec < 0) {
                left.tv_sec--;
                left.tv_nsec += 1000000000L;
            }
            if (left.tv_sec < 0)
                break;
            FD_ZERO(&rfds);
            FD_SET(d.wake_fd[0], &rfds);
            if (pselect(d.wake_fd[0] + 1, &rfds, NULL, NULL, &left, &wait_mask) > 0)
                while (read(d.wake_fd[0], buf, sizeof buf) > 0) {
                }
        }
        if (stop_signal)
            fprintf(stderr, QCDEMO_NAME ": signal %d, stopping\n", (int)stop_signal);
    }
    /* No more events: the wait is over. */
    pthread_mutex_lock(&out_lock);
    d.finished = 1;
    pthread_mutex_unlock(&out_lock);
    if (!sess_stop(&d))
        ok = 0;
    close(d.wake_fd[0]);
    close(d.wake_fd[1]);
    sb_free(&text);
    sb_free(&config);
    return ok && sent ? 0 : 1;
}

static int subcmd_sessions(int argc, char **argv)
{
    if (argc < 3 || strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0 ||
        strcmp(argv[2], "help") == 0) {
        sessions_usage(argc < 3 ? stderr : stdout);
        return argc < 3 ? 2 : 0;
    }
    if (strcmp(argv[2], "ps") == 0)
        return sessions_ps(argc, argv);
    if (strcmp(argv[2], "listen") == 0)
        return sessions_listen(argc, argv);
    if (strcmp(argv[2], "send") == 0)
        return sessions_send(argc, argv);
    fprintf(stderr, QCDEMO_NAME " sessions: unknown command: %s\n", argv[2]);
    sessions_usage(stderr);
    return 2;
}

/* ------------------------------------------------------------------------ */
/* main: subcommand dispatch                                                  */
/* ------------------------------------------------------------------------ */

typedef int (*subcmd_fn)(int argc, char **argv);

static const struct {
    const char *name;
    subcmd_fn fn;
    const char *summary;
} subcommands[] = {
    {"ide", subcmd_ide, "run an IDE companion driven by commands on stdin"},
    {"sessions", subcmd_sessions, "cross-session messaging: ps, listen, send"},
};

static void usage(FILE *f)
{
    size_t i;
    fprintf(f,
            "usage: " QCDEMO_NAME " SUBCOMMAND [ARGS...]\n"
            "       " QCDEMO_NAME " --help | --version\n"
            "\n"
            "Demo host for the qwen-companion C library (ABI %u).\n"
            "\n"
            "Subcommands:\n",
            (unsigned)qc_abi_version());
    for (i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        fprintf(f, "  %-10s %s\n", subcommands[i].name, subcommands[i].summary);
    fputs("\nRun '" QCDEMO_NAME " SUBCOMMAND --help' for details.\n", f);
}

int main(int argc, char **argv)
{
    size_t i;

    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("%s\n", qc_version());
        return 0;
    }
    for (i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (strcmp(argv[1], subcommands[i].name) == 0)
            return subcommands[i].fn(argc, argv);

    fprintf(stderr, QCDEMO_NAME ": unknown subcommand: %s\n", argv[1]);
    usage(stderr);
    return 2;
}
