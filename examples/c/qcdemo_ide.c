/*
 * qcdemo_ide.c — `qcdemo ide`: the demo plays the part of an editor. It
 * starts a companion (the MCP server that Qwen Code connects to), turns
 * commands read from stdin into editor events and prints what happens as
 * JSON lines on stdout (see ide_usage). The diff table (one mutex) is shared
 * by the main thread and the library's callback thread.
 */
#include "qcdemo_common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
    qcd_mutex lock;
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
    qcd_mutex_lock(&t->lock);
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
    qcd_mutex_unlock(&t->lock);
}

/* Record (text != NULL) or forget (text == NULL) the user's edited text.
 * Returns 0 if no diff is known for path. */
static int diff_set_edited(diff_table *t, const char *path, const char *text, size_t len)
{
    diff_entry **pp;
    qcd_mutex_lock(&t->lock);
    pp = diff_find_locked(t, path);
    if (pp != NULL) {
        free((*pp)->edited);
        (*pp)->edited = text != NULL ? xmemdup(text, len) : NULL;
        (*pp)->edited_len = text != NULL ? len : 0;
    }
    qcd_mutex_unlock(&t->lock);
    return pp != NULL;
}

static void diff_remove(diff_table *t, const char *path)
{
    diff_entry **pp, *e;
    qcd_mutex_lock(&t->lock);
    pp = diff_find_locked(t, path);
    if (pp != NULL) {
        e = *pp;
        *pp = e->next;
        diff_entry_free(e);
    }
    qcd_mutex_unlock(&t->lock);
}

/* Remove the diff for path and hand back a copy of its current text (the
 * edited text if any, else the proposed text). Returns 0 if unknown. */
static int diff_take_current(diff_table *t, const char *path, char **text, size_t *len)
{
    diff_entry **pp, *e;
    qcd_mutex_lock(&t->lock);
    pp = diff_find_locked(t, path);
    if (pp == NULL) {
        qcd_mutex_unlock(&t->lock);
        return 0;
    }
    e = *pp;
    *pp = e->next;
    qcd_mutex_unlock(&t->lock);
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
    qcd_mutex_lock(&t->lock);
    for (e = t->head; e != NULL; e = next) {
        next = e->next;
        diff_entry_free(e);
    }
    t->head = NULL;
    qcd_mutex_unlock(&t->lock);
}

/* ------------------------------------------------------------------------ */
/* The `ide` subcommand                                                       */
/* ------------------------------------------------------------------------ */

typedef struct {
    qc_companion *companion;
    diff_table diffs;
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
    if (n > 0 && !qcd_path_is_absolute(dir, n)) {
        sbuf abs = {0};
        char cwd[4096];
        if (qcd_getcwd(cwd, sizeof cwd)) {
            sb_puts(&abs, cwd);
            if (abs.len == 0 || !qcd_is_dir_sep(abs.data[abs.len - 1]))
                sb_putc(&abs, QCD_DIR_SEP);
        }
        sb_putn(&abs, dir, n);
        sb_json_strn(b, abs.data, abs.len);
        sb_free(&abs);
    } else {
        sb_json_strn(b, dir, n);
    }
}

/* "DIR[:DIR...]" (Windows: "DIR[;DIR...]") -> JSON array of strings. Returns the number of roots. */
static size_t sb_json_roots(sbuf *b, const char *spec)
{
    size_t count = 0;
    const char *p = spec;
    sb_putc(b, '[');
    for (;;) {
        const char *colon = strchr(p, QCD_PATH_LIST_SEP);
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

/* ---- stdin commands (demo_cmd_fn: ctx is the ide_demo) */

/* A library call that takes the companion and one string. */
typedef qc_status (*companion_str_fn)(qc_companion *c, const char *s, char **error);

/* `VERB ARG` with ARG required: fn(companion, ARG). Returns 1 when it
 * succeeded (else an error event was printed). */
static int call_with_arg(ide_demo *d, const char *verb, const char *arg, const char *usage, companion_str_fn fn)
{
    char *err = NULL;
    return require_arg(verb, arg, usage) && check_status(verb, fn(d->companion, arg, &err), &err);
}

static void cmd_open(void *ctx, const char *verb, char *arg)
{
    call_with_arg(ctx, verb, arg, "PATH", qc_companion_file_opened);
}

static void cmd_focus(void *ctx, const char *verb, char *arg)
{
    call_with_arg(ctx, verb, arg, "PATH", qc_companion_file_focused);
}

static void cmd_close(void *ctx, const char *verb, char *arg)
{
    call_with_arg(ctx, verb, arg, "PATH", qc_companion_file_closed);
}

static void cmd_cursor(void *ctx, const char *verb, char *arg)
{
    ide_demo *d = ctx;
    const char *sp = strchr(arg, ' ');
    uint32_t line, character;
    char *err = NULL;

    if (sp == NULL || !parse_u32(arg, sp, &line) || !parse_u32(sp + 1, sp + 1 + strlen(sp + 1), &character)) {
        emit_error("%s: expected two unsigned integers (usage: cursor LINE CHAR)", verb);
        return;
    }
    check_status(verb, qc_companion_set_cursor(d->companion, NULL, line, character, &err), &err);
}

static void cmd_select(void *ctx, const char *verb, char *arg)
{
    ide_demo *d = ctx;
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

static void cmd_context(void *ctx, const char *verb, char *arg)
{
    call_with_arg(ctx, verb, arg, "JSON", qc_companion_set_context_json);
}

static void cmd_workspace(void *ctx, const char *verb, char *arg)
{
    ide_demo *d = ctx;
    sbuf roots = {0};
    char *err = NULL;
    if (!require_arg(verb, arg, QCD_DIRS))
        return;
    sb_json_roots(&roots, arg);
    check_status(verb, qc_companion_set_workspace_roots_json(d->companion, roots.data, &err), &err);
    sb_free(&roots);
}

static void cmd_trust(void *ctx, const char *verb, char *arg)
{
    ide_demo *d = ctx;
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

static void cmd_accept(void *ctx, const char *verb, char *arg)
{
    ide_demo *d = ctx;
    char *err = NULL;
    if (!require_arg(verb, arg, "PATH"))
        return;
    if (check_status(verb, qc_companion_diff_accept(d->companion, arg, NULL, 0, &err), &err))
        diff_set_edited(&d->diffs, arg, NULL, 0); /* the user kept the proposed text */
}

static void cmd_accept_from(void *ctx, const char *verb, char *arg)
{
    ide_demo *d = ctx;
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

static void cmd_reject(void *ctx, const char *verb, char *arg)
{
    ide_demo *d = ctx;
    if (call_with_arg(d, verb, arg, "PATH", qc_companion_diff_reject))
        diff_remove(&d->diffs, arg);
}

static void cmd_closed(void *ctx, const char *verb, char *arg)
{
    ide_demo *d = ctx;
    if (call_with_arg(d, verb, arg, "PATH", qc_companion_diff_closed))
        diff_remove(&d->diffs, arg);
}

/* `stop` is command_loop's own. */
static const demo_command ide_commands[] = {
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
};

/* Print the "ready" event; returns 0 if the companion's state can't be read. */
static int ide_emit_ready(ide_demo *d)
{
    uint16_t port = 0;
    char *lock = NULL, *env = NULL, *files = NULL, *err = NULL;
    sbuf line = {0};

    if (!check_status("port", qc_companion_port(d->companion, &port, &err), &err))
        return 0;
    if (!check_status("lock file path", qc_companion_lock_file_path(d->companion, &lock, &err), &err))
        return 0;
    if (!check_status("terminal env", qc_companion_terminal_env_json(d->companion, &env, &err), &err)) {
        qc_string_free(lock);
        return 0;
    }
    if (!check_status("discovery files", qc_companion_discovery_files_json(d->companion, &files, &err), &err)) {
        qc_string_free(lock);
        qc_string_free(env);
        return 0;
    }
    sb_printf(&line, "{\"event\":\"ready\",\"port\":%u,\"lockFile\":", (unsigned)port);
    sb_json_str(&line, lock);
    /* env and the discovery files are JSON objects produced by the library: embedded verbatim. */
    sb_puts(&line, ",\"discoveryFiles\":");
    sb_puts(&line, files != NULL ? files : "{}");
    sb_puts(&line, ",\"env\":");
    sb_puts(&line, env != NULL ? env : "{}");
    sb_putc(&line, '}');
    emit_line(&line);
    sb_free(&line);
    qc_string_free(lock);
    qc_string_free(env);
    qc_string_free(files);
    return 1;
}

static void ide_usage(FILE *f)
{
    fputs("usage: " QCDEMO_NAME " ide --workspace " QCD_DIRS " [--ide-name NAME]\n"
          "          [--cli qwen|gemini|both]\n"
          "\n"
          "Starts an IDE companion for Qwen Code (--cli qwen, the default), Gemini CLI\n"
          "(--cli gemini) or both (one server, one port, each CLI's discovery file) and\n"
          "prints JSON lines on stdout:\n"
          "  {\"event\":\"ready\",\"port\":N,\"lockFile\":\"...\",\n"
          "   \"discoveryFiles\":{\"qwen\":\"...\"|null,\"gemini\":\"...\"|null},\"env\":{...}}\n"
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
          "  workspace " QCD_DIRS "                set the workspace roots\n"
          "  trust true|false                      workspace trust\n"
          "  accept PATH                           accept a diff with the proposed text\n"
          "  accept-from FILE PATH                 accept a diff with the text in FILE (no spaces)\n"
          "  reject PATH                           reject a diff\n"
          "  closed PATH                           the user closed a diff\n"
          "  stop                                  stop and exit\n"
          "closeDiff requests are answered with the diff's current text.\n"
          "EOF, " QCD_STOP_SIGNALS " stop cleanly too (exit status 0).\n",
          f);
}

int qcdemo_ide_main(int argc, char **argv)
{
    const char *workspace = NULL, *ide_name = NULL, *cli = NULL;
    ide_demo d;
    sbuf config = {0};
    qcd_sigmask wait_mask;
    char *err = NULL;
    int i, rc = 0;

    for (i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            ide_usage(stdout);
            return 0;
        }
        if (take_option(argc, argv, &i, "--workspace", &workspace) ||
            take_option(argc, argv, &i, "--ide-name", &ide_name) ||
            take_option(argc, argv, &i, "--cli", &cli))
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
    if (cli != NULL && strcmp(cli, "qwen") != 0 && strcmp(cli, "gemini") != 0 && strcmp(cli, "both") != 0) {
        fprintf(stderr, QCDEMO_NAME " ide: --cli must be qwen, gemini or both, not '%s'\n", cli);
        ide_usage(stderr);
        return 2;
    }

    /* Before the library starts any thread. */
    qcd_setup_signals(&wait_mask);

    memset(&d, 0, sizeof d);
    qcd_mutex_init(&d.diffs.lock);

    sb_puts(&config, "{\"workspaceRoots\":");
    if (sb_json_roots(&config, workspace) == 0) {
        fputs(QCDEMO_NAME " ide: --workspace names no directory\n", stderr);
        sb_free(&config);
        qcd_mutex_destroy(&d.diffs.lock);
        return 2;
    }
    if (ide_name != NULL) {
        sb_puts(&config, ",\"ideName\":");
        sb_json_str(&config, ide_name);
    }
    if (cli != NULL) {
        sb_puts(&config, ",\"cli\":");
        sb_json_str(&config, cli);
    }
    sb_putc(&config, '}');

    if (!check_status("start", qc_companion_new(config.data, &d.companion, &err), &err)) {
        sb_free(&config);
        qcd_mutex_destroy(&d.diffs.lock);
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
        command_loop(&wait_mask, ide_commands, COUNT_OF(ide_commands), &d);
        report_stop_signal();
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
    qcd_mutex_destroy(&d.diffs.lock);

    emit_stopped();
    return rc;
}
