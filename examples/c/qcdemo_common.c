/*
 * qcdemo_common.c — the part of qcdemo that every subcommand shares; see
 * qcdemo_common.h for what is here and for the threads and signals.
 */
#include "qcdemo_common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Memory and growable byte buffers                                          */
/* ------------------------------------------------------------------------ */

void die_oom(void)
{
    fputs(QCDEMO_NAME ": out of memory\n", stderr);
    abort();
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL)
        die_oom();
    return q;
}

/* Copy of n bytes plus a terminating NUL. */
char *xmemdup(const char *s, size_t n)
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

void sb_reserve(sbuf *b, size_t extra)
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

void sb_putn(sbuf *b, const char *s, size_t n)
{
    sb_reserve(b, n);
    if (n > 0)
        memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void sb_puts(sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

void sb_putc(sbuf *b, char c) { sb_putn(b, &c, 1); }

void sb_vprintf(sbuf *b, const char *fmt, va_list ap)
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

void sb_printf(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(b, fmt, ap);
    va_end(ap);
}

void sb_free(sbuf *b)
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
size_t utf8_seq_len(const unsigned char *s, size_t n)
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
void sb_json_strn(sbuf *b, const char *s, size_t n)
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

void sb_json_str(sbuf *b, const char *s)
{
    if (s == NULL)
        sb_puts(b, "null");
    else
        sb_json_strn(b, s, strlen(s));
}

/* ------------------------------------------------------------------------ */
/* Event lines on stdout, errors, the library log                             */
/* ------------------------------------------------------------------------ */

/* stdout is shared by the main thread and the library's callback thread. */
qcd_mutex out_lock = QCD_MUTEX_INIT;

/* Write b as one line on stdout and flush; the caller holds out_lock. */
void write_line_locked(const sbuf *b)
{
    fwrite(b->data, 1, b->len, stdout);
    fputc('\n', stdout);
    fflush(stdout);
}

/* Write b as one line on stdout and flush; b must hold one JSON object. */
void emit_line(const sbuf *b)
{
    qcd_mutex_lock(&out_lock);
    write_line_locked(b);
    qcd_mutex_unlock(&out_lock);
}

/* {"event":"error","message":<printf-formatted message>} */
void emit_error(const char *fmt, ...)
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

void emit_stopped(void)
{
    sbuf line = {0};
    sb_puts(&line, "{\"event\":\"stopped\"}");
    emit_line(&line);
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
int check_status(const char *what, qc_status st, char **errp)
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
void on_log(void *user_data, uint32_t level, const char *message)
{
    static const char *const names[] = {"?", "error", "warn", "info", "debug", "trace"};
    (void)user_data;
    fprintf(stderr, QCDEMO_NAME ": [%s] %s\n", level <= 5 ? names[level] : "?",
            message != NULL ? message : "");
}

/* ------------------------------------------------------------------------ */
/* Files and arguments                                                        */
/* ------------------------------------------------------------------------ */

/* Read a whole file. Returns NULL (errno set) on failure. */
char *read_file(const char *path, size_t *out_len)
{
    FILE *f = qcd_fopen(path, "rb");
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
int parse_u32(const char *s, const char *end, uint32_t *out)
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

int require_arg(const char *verb, const char *arg, const char *usage)
{
    if (arg[0] == '\0') {
        emit_error("%s: missing argument (usage: %s %s)", verb, verb, usage);
        return 0;
    }
    return 1;
}

/* `--opt VALUE` or `--opt=VALUE`; advances *i past the value. */
int take_option(int argc, char **argv, int *i, const char *name, const char **value)
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

/* ------------------------------------------------------------------------ */
/* Reading the library's JSON                                                 */
/* ------------------------------------------------------------------------ */

/*
 * The library hands out JSON documents (compact, valid UTF-8). The demo reads
 * a few fields of them and embeds other values (a received frame) verbatim,
 * so it only needs to find values: a span is the raw text of one JSON value.
 * Every function here stays inside the given bytes, whatever they hold.
 */

jspan js_doc(const char *s)
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
char *js_strn(jspan v, size_t *len)
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

char *js_str(jspan v)
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
int js_get(jspan obj, const char *key, jspan *out)
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
char *js_get_str(jspan obj, const char *key)
{
    jspan v;
    return js_get(obj, key, &v) ? js_str(v) : NULL;
}

void js_iter(jiter *it, jspan arr)
{
    it->s = arr.p;
    it->n = arr.n;
    it->i = 0;
    it->state = 0;
}

int js_next(jiter *it, jspan *elem)
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
int sb_copy_member(sbuf *b, const char *name, jspan obj, const char *key)
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

void sb_copy_members(sbuf *b, jspan obj, const member_map *map, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        sb_copy_member(b, map[i].name, obj, map[i].key);
}

/* ------------------------------------------------------------------------ */
/* Commands on stdin, stop signals                                            */
/* ------------------------------------------------------------------------ */

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

/*
 * One stdin line (without its '\n'): run the handler of its verb. `stop`
 * (whatever follows it) sets *stop_requested.
 */
static void dispatch_line(const demo_command *cmds, size_t ncmds, void *ctx, int *stop_requested,
                          char *line, size_t len)
{
    char *verb, *arg;
    size_t i;

    if (!split_command(line, len, &verb, &arg))
        return;
    if (strcmp(verb, "stop") == 0) {
        *stop_requested = 1;
        return;
    }
    for (i = 0; i < ncmds; i++) {
        if (strcmp(verb, cmds[i].verb) == 0) {
            cmds[i].fn(ctx, verb, arg);
            return;
        }
    }
    emit_error("unknown command: %s", verb);
}

/* ---- signals (qcd_setup_signals: qcdemo_platform_*.c) */

void report_stop_signal(void)
{
    if (stop_signal)
        fprintf(stderr, QCDEMO_NAME ": signal %d, stopping\n", (int)stop_signal);
}

/*
 * Read commands from stdin until EOF, `stop` or a stop signal. Lines may be
 * of any length; a last line without '\n' is still executed. Returns 1 when
 * `stop` ended the loop.
 */
int command_loop(const qcd_sigmask *wait_mask, const demo_command *cmds, size_t ncmds, void *ctx)
{
    sbuf in = {0};
    char chunk[65536];
    size_t start = 0;
    int stop_requested = 0;

    while (!stop_requested && !stop_signal) {
        long got = qcd_read_stdin(wait_mask, chunk, sizeof chunk);

        if (got == QCD_READ_AGAIN)
            continue; /* a signal: the loop condition decides */
        if (got == QCD_READ_ERROR)
            break; /* reported */
        if (got == QCD_READ_EOF) { /* EOF: run an unterminated last line, then stop */
            if (in.len > start)
                dispatch_line(cmds, ncmds, ctx, &stop_requested, in.data + start, in.len - start);
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
            dispatch_line(cmds, ncmds, ctx, &stop_requested, in.data + start, len);
            start += len + 1;
            if (stop_requested)
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
    return stop_requested;
}
