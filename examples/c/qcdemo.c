/*
 * qcdemo — a small C host for the qwen-companion C ABI.
 *
 * It plays the part of an editor: it starts a companion (the MCP server that
 * Qwen Code connects to), turns commands read from stdin into editor events
 * and prints what happens as JSON lines on stdout. See `qcdemo --help`.
 *
 * Only the public header is used. Subcommands are dispatched on argv[1]
 * through the `subcommands` table at the bottom of this file; add new ones
 * there.
 *
 * Threads: the main thread reads stdin and calls the library; the library
 * runs every callback on its own callback thread. The two share stdout (one
 * mutex, one whole line per write, flushed) and the diff table (one mutex).
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
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
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

/* Write b as one line on stdout and flush; b must hold one JSON object. */
static void emit_line(const sbuf *b)
{
    pthread_mutex_lock(&out_lock);
    fwrite(b->data, 1, b->len, stdout);
    fputc('\n', stdout);
    fflush(stdout);
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

/* One stdin line (without its '\n'). */
static void ide_handle_line(ide_demo *d, char *line, size_t len)
{
    char *verb, *arg, *sp;
    size_t i;

    if (len > 0 && line[len - 1] == '\r')
        line[--len] = '\0';
    if (len == 0 || line[0] == '#')
        return; /* blank lines and comments */
    if (memchr(line, '\0', len) != NULL) {
        emit_error("command line contains a NUL byte");
        return;
    }
    verb = line;
    sp = strchr(line, ' ');
    if (sp != NULL) {
        *sp = '\0';
        arg = sp + 1;
    } else {
        arg = line + len; /* "" */
    }
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

/*
 * Read commands from stdin until EOF, `stop` or a stop signal. Lines may be
 * of any length; a last line without '\n' is still executed.
 */
static void ide_command_loop(ide_demo *d, const sigset_t *wait_mask)
{
    sbuf in = {0};
    char chunk[65536];
    size_t start = 0;

    while (!d->stop_requested && !stop_signal) {
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
                ide_handle_line(d, in.data + start, in.len - start);
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
            ide_handle_line(d, in.data + start, len);
            start += len + 1;
            if (d->stop_requested)
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
        fprintf(stderr, QCDEMO_NAME " ide: %s needs a value\n", name);
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
/* main: subcommand dispatch                                                  */
/* ------------------------------------------------------------------------ */

typedef int (*subcmd_fn)(int argc, char **argv);

static const struct {
    const char *name;
    subcmd_fn fn;
    const char *summary;
} subcommands[] = {
    {"ide", subcmd_ide, "run an IDE companion driven by commands on stdin"},
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
