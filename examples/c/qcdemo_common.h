/*
 * qcdemo_common.h — what every qcdemo subcommand shares (qcdemo_common.c).
 *
 * One file per subcommand (qcdemo_ide.c, qcdemo_sessions.c, ...) plus this
 * shared part; qcdemo.c holds only main, the usage text and the dispatch.
 * A new subcommand adds its qcdemo_<name>.c, declares its entry point at the
 * bottom of this header, adds a row to the `subcommands` table in qcdemo.c
 * and its source to DEMO_SRCS in the Makefile.
 *
 * Shared here: memory and growable buffers, JSON output (escaping) and
 * reading (the library's JSON documents), the event lines on stdout and the
 * error reporting, the library log callback, argument helpers, reading
 * commands from stdin, and the stop signals.
 *
 * Threads: the main thread reads stdin and calls the library; the library
 * runs every callback on its own callback thread. The two share stdout (one
 * mutex, `out_lock`, one whole line per write, flushed).
 *
 * Signals: SIGTERM, SIGINT and SIGHUP are blocked in every thread (they are
 * blocked by qcd_setup_signals() before the library creates any thread, and
 * threads inherit the mask) and unblocked only atomically inside pselect() in
 * the main thread. A signal therefore always interrupts the wait for stdin
 * and never lands in a library thread. On Windows the console control events
 * (Ctrl+C, Ctrl+Break, closing the console) play their part: see
 * qcdemo_platform.h, which holds everything that differs between systems.
 */
#ifndef QCDEMO_COMMON_H
#define QCDEMO_COMMON_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "qwen_companion.h"
#include "qcdemo_platform.h"

#define QCDEMO_NAME "qcdemo"

/* The number of elements of an array. */
#define COUNT_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- memory and growable byte buffers */

/* Print "qcdemo: out of memory" and abort. */
void die_oom(void);
/* realloc that never returns NULL (n == 0 allocates 1 byte). */
void *xrealloc(void *p, size_t n);
/* Copy of n bytes plus a terminating NUL. */
char *xmemdup(const char *s, size_t n);

/* A NUL-terminated, growable byte buffer; {0} is the empty buffer. */
typedef struct {
    char *data;
    size_t len;
    size_t cap;
} sbuf;

void sb_reserve(sbuf *b, size_t extra);
void sb_putn(sbuf *b, const char *s, size_t n);
void sb_puts(sbuf *b, const char *s);
void sb_putc(sbuf *b, char c);
void sb_vprintf(sbuf *b, const char *fmt, va_list ap);
void sb_printf(sbuf *b, const char *fmt, ...);
void sb_free(sbuf *b);

/* ---- JSON output */

/* Length of the well-formed UTF-8 sequence at s (at most n bytes), or 0. */
size_t utf8_seq_len(const unsigned char *s, size_t n);
/* Append s[0..n) as a JSON string literal (always valid JSON). */
void sb_json_strn(sbuf *b, const char *s, size_t n);
/* Append s as a JSON string literal, or null when s is NULL. */
void sb_json_str(sbuf *b, const char *s);

/* ---- event lines on stdout, errors, the library log */

/* stdout is shared by the main thread and the library's callback thread. */
extern qcd_mutex out_lock;

/* Write b as one line on stdout and flush; the caller holds out_lock. */
void write_line_locked(const sbuf *b);
/* Write b as one line on stdout and flush; b must hold one JSON object. */
void emit_line(const sbuf *b);
/* {"event":"error","message":<printf-formatted message>} */
void emit_error(const char *fmt, ...);
/* {"event":"stopped"}, the last line of a subcommand that prints events. */
void emit_stopped(void);
/* On failure of a library call made for `what`, emit an error event; frees
 * and resets *errp (errp may be NULL). Returns 1 on success, 0 on failure. */
int check_status(const char *what, qc_status st, char **errp);
/* A qc_*_set_log_callback callback: log lines go to stderr only. */
void on_log(void *user_data, uint32_t level, const char *message);

/* ---- files and arguments */

/* Read a whole file. Returns NULL (errno set) on failure. */
char *read_file(const char *path, size_t *out_len);
/* Parse a decimal uint32 that must span the whole of [s, end). */
int parse_u32(const char *s, const char *end, uint32_t *out);
/* `--opt VALUE` or `--opt=VALUE` at argv[*i]; advances *i past the value.
 * A missing value is reported on stderr and exits with status 2. */
int take_option(int argc, char **argv, int *i, const char *name, const char **value);
/* A stdin command's argument must not be empty: else emit an error event
 * "VERB: missing argument (usage: VERB USAGE)" and return 0. */
int require_arg(const char *verb, const char *arg, const char *usage);

/* ---- reading the library's JSON (see qcdemo_common.c) */

/* The raw text of one JSON value. */
typedef struct {
    const char *p;
    size_t n;
} jspan;

/* The whole of s (NULL is the empty document). */
jspan js_doc(const char *s);
/* Decode the JSON string v (NULL if it is not one); free with free(). */
char *js_strn(jspan v, size_t *len);
char *js_str(jspan v);
/* The member `key` of the object obj (the first one, if repeated). */
int js_get(jspan obj, const char *key, jspan *out);
/* The string member `key` of obj, decoded (NULL if absent or not a string). */
char *js_get_str(jspan obj, const char *key);

/* Iteration over the elements of a JSON array: js_iter, then js_next until 0. */
typedef struct {
    const char *s;
    size_t n, i;
    int state; /* 0 not started, 1 inside, 2 done */
} jiter;

void js_iter(jiter *it, jspan arr);
int js_next(jiter *it, jspan *elem);
/* Append ,"name":<raw value of obj's member key>; nothing if there is none. */
int sb_copy_member(sbuf *b, const char *name, jspan obj, const char *key);
/* One member of an event copied from the library's JSON: {name, key}. */
typedef struct {
    const char *name; /* in the event */
    const char *key;  /* in the library's object */
} member_map;
/* sb_copy_member for each of map[0..n), in that order. */
void sb_copy_members(sbuf *b, jspan obj, const member_map *map, size_t n);

/* ---- commands on stdin, stop signals (stop_signal and qcd_setup_signals
 * are in qcdemo_platform.h) */

/* A handler for `VERB ARG`: `arg` is the rest of the line after "VERB " (""
 * if none); it may modify arg, and may assume nothing else about it. */
typedef void (*demo_cmd_fn)(void *ctx, const char *verb, char *arg);

typedef struct {
    const char *verb;
    demo_cmd_fn fn;
} demo_command;

/* If a stop signal arrived, say so on stderr ("qcdemo: signal N, stopping"). */
void report_stop_signal(void);
/*
 * Read commands from stdin, one per line (any length; a final '\r' is
 * dropped; an unterminated last line still runs), and run each with the
 * handler of its verb in cmds[0..ncmds), ctx passed on, until EOF, the
 * command `stop` (built in: a table needs no row for it) or a stop signal.
 * Blank lines and '#' comments are skipped; an unknown verb or a line with
 * a NUL byte is an error event. Returns 1 when the command `stop` ended it
 * (a subcommand that answers every command then answers `stop` too), 0 for
 * EOF, a stop signal or a read error.
 */
int command_loop(const qcd_sigmask *wait_mask, const demo_command *cmds, size_t ncmds, void *ctx);

/* ---- the subcommands: argc/argv are main's (argv[1] is the subcommand) */

int qcdemo_ide_main(int argc, char **argv);
int qcdemo_sessions_main(int argc, char **argv);
int qcdemo_plugins_main(int argc, char **argv);

#endif /* QCDEMO_COMMON_H */
