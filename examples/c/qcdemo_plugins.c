/*
 * qcdemo_plugins.c — `qcdemo plugins install|uninstall|list|call|serve|
 * register-mcp`: the demo as a plugin host (qc_plugin_host_*). It manages a
 * plugins directory, calls plugin tools once, serves one long-lived host
 * driven by commands on stdin, with its plugin MCP server
 * (qc_plugin_host_mcp_*) and view server (qc_plugin_host_views_*), or writes the `qwen-companion-plugins` entry of
 * Qwen Code's settings (qc_mcp_register; see plugins_usage).
 *
 * Every answer is one JSON line on stdout; the plugins' own stdout never
 * reaches ours (the library reads it). One-shot commands exit 0 on success,
 * 1 when the request was refused, 2 on a usage error.
 *
 * Every host the demo opens offers the capability show_notification with
 * one handler (on_show_notification): the demo "shows" the notification by
 * printing it as a host_request event and answers {"shown":true}, in a
 * one-shot call (before its answer line) as in serve.
 *
 * `serve` runs its calls with qc_plugin_host_call_async and prints the
 * result from the completion callback: callbacks run one at a time, in
 * order, on the library's callback thread, so the ui_push events a call
 * caused are printed before its result.
 */
#include "qcdemo_common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers */

static const member_map request_members[] = {
    {"id", "id"}, {"plugin", "plugin"}, {"capability", "capability"}, {"params", "params"}};

/* show_notification, for every host of the demo (user_data is the host):
 * answers {"shown":true}, then prints the request and the answer as
 * {"event":"host_request",…,"answer":{"shown":true},"answered":BOOL}. It
 * runs on the host's callback thread, which qc_plugin_host_free joins. */
static void on_show_notification(void *user_data, uint64_t id, const char *json)
{
    qc_plugin_host *h = user_data;
    static const char answer[] = "{\"shown\":true}";
    sbuf line = {0};
    char *err = NULL;
    qc_status st = qc_plugin_host_respond(h, id, answer, NULL, &err);

    sb_puts(&line, "{\"event\":\"host_request\"");
    sb_copy_members(&line, js_doc(json), request_members, COUNT_OF(request_members));
    sb_puts(&line, ",\"answer\":");
    sb_puts(&line, answer);
    sb_printf(&line, ",\"answered\":%s}", st == QC_OK ? "true" : "false");
    emit_line(&line);
    sb_free(&line);
    if (st != QC_OK)
        fprintf(stderr, QCDEMO_NAME " plugins: show_notification: %s: %s\n", qc_status_name(st),
                err != NULL ? err : "");
    qc_string_free(err);
}

/* Creates the host over DIR (NULL: the library's default directory), with
 * the log on stderr and show_notification offered (on_show_notification).
 * Returns NULL after printing the failure on stderr. */
static qc_plugin_host *plugins_open(const char *dir, const char *timeout_ms, const char *cwd)
{
    qc_plugin_host *h = NULL;
    sbuf cfg = {0};
    char *err = NULL;
    qc_status st;

    sb_putc(&cfg, '{');
    if (dir != NULL) {
        sb_puts(&cfg, "\"pluginsDir\":");
        sb_json_str(&cfg, dir);
        sb_putc(&cfg, ',');
    }
    if (timeout_ms != NULL)
        sb_printf(&cfg, "\"callTimeoutMs\":%s,", timeout_ms);
    if (cwd != NULL) {
        sb_puts(&cfg, "\"workspaceRoot\":");
        sb_json_str(&cfg, cwd);
        sb_putc(&cfg, ',');
    }
    if (cfg.len > 1)
        cfg.data[--cfg.len] = '\0'; /* the last comma */
    sb_putc(&cfg, '}');
    st = qc_plugin_host_new(cfg.data, &h, &err);
    sb_free(&cfg);
    if (st != QC_OK) {
        fprintf(stderr, QCDEMO_NAME " plugins: %s: %s\n", qc_status_name(st), err != NULL ? err : "");
        qc_string_free(err);
        return NULL;
    }
    qc_plugin_host_set_log_callback(h, on_log, NULL, NULL, QC_LOG_WARN, NULL);
    st = qc_plugin_host_set_capability_callback(h, "show_notification", on_show_notification, h, NULL, &err);
    if (st != QC_OK) {
        fprintf(stderr, QCDEMO_NAME " plugins: show_notification: %s: %s\n", qc_status_name(st),
                err != NULL ? err : "");
        qc_string_free(err);
        qc_plugin_host_free(h);
        return NULL;
    }
    return h;
}

/* Appends the error object of a failed call: the library's error_json, or
 * for an argument error {"kind":KIND,"message":…,"status":…}. */
static void sb_error_object(sbuf *b, const char *kind, qc_status st, const char *error_json, const char *err)
{
    if (error_json != NULL) {
        sb_puts(b, error_json);
        return;
    }
    sb_puts(b, "{\"");
    sb_puts(b, kind);
    sb_puts(b, "\":\"invalid_argument\",\"message\":");
    sb_json_str(b, err != NULL ? err : "");
    sb_puts(b, ",\"status\":");
    sb_json_str(b, qc_status_name(st));
    sb_putc(b, '}');
}

/* Appends "ok":true,FIELD:VALUE (VALUE: value, else out, else null; with
 * FIELD NULL, out's members are merged in instead) or "ok":false,"error":{…}.
 * out, ej and err are the library's strings: freed here. */
static void sb_outcome(sbuf *b, const char *field, const char *kind, qc_status st, const char *value, char *out,
                       char *ej, char *err)
{
    if (st == QC_OK) {
        sb_puts(b, "\"ok\":true");
        if (field != NULL) {
            sb_puts(b, ",\"");
            sb_puts(b, field);
            sb_puts(b, "\":");
            sb_puts(b, value != NULL ? value : out != NULL ? out : "null");
        } else if (out != NULL && out[0] == '{' && out[1] != '}') {
            sb_putc(b, ',');
            sb_putn(b, out + 1, strlen(out) - 2); /* without out's braces */
        }
    } else {
        sb_puts(b, "\"ok\":false,\"error\":");
        sb_error_object(b, kind, st, ej, value != NULL ? value : err);
    }
    qc_string_free(out);
    qc_string_free(ej);
    qc_string_free(err);
}

/* Prints {"ok":…} (see sb_outcome). Returns the exit code (0 or 1). */
static int print_outcome(const char *field, const char *kind, qc_status st, char *out, char *ej, char *err)
{
    sbuf line = {0};
    sb_putc(&line, '{');
    sb_outcome(&line, field, kind, st, NULL, out, ej, err);
    sb_putc(&line, '}');
    emit_line(&line);
    sb_free(&line);
    return st == QC_OK ? 0 : 1;
}

/* Reports a failure to free the host (it still ended every plugin). */
static int plugins_close(qc_plugin_host *h, int rc)
{
    if (h != NULL && qc_plugin_host_free(h) != QC_OK) {
        fprintf(stderr, QCDEMO_NAME " plugins: could not free the host\n");
        return 1;
    }
    return rc;
}

static void plugins_usage(FILE *f)
{
    fputs("usage: " QCDEMO_NAME " plugins install SRC [--dir DIR]\n"
          "       " QCDEMO_NAME " plugins uninstall ID [--dir DIR] [--remove-data]\n"
          "       " QCDEMO_NAME " plugins list [--dir DIR] [--json]\n"
          "       " QCDEMO_NAME " plugins call [--dir DIR] PLUGIN_ID TOOL PARAMS_JSON [--cwd DIR] [--timeout-ms N]\n"
          "       " QCDEMO_NAME " plugins serve [--dir DIR] [--cwd DIR] [--timeout-ms N]\n"
          "       " QCDEMO_NAME " plugins register-mcp --scope user|project [--remove] [--bridge PATH]\n"
          "                 [--always-load-tools]\n"
          "\n"
          "A plugin host over the plugins directory DIR (default\n"
          "$QWEN_HOME/companion/plugins). Answers are JSON lines on stdout:\n"
          "  install    {\"ok\":true,\"plugin\":{id,name,version,tools,...}} or\n"
          "             {\"ok\":false,\"error\":{\"code\",\"message\",\"problems\"?}}\n"
          "  uninstall  {\"ok\":true,\"id\",\"dataRemoved\"} or the same refusal\n"
          "  list       --json: [{id,name,version,enabled,tools:[{name,modelVisible}],\n"
          "             manifest,lastError}]\n"
          "  call       {\"ok\":true,\"result\":{\"content\":[...],\"details\"}} or\n"
          "             {\"ok\":false,\"error\":{\"kind\",\"message\",...}}; kind is schema,\n"
          "             unknown_tool, timeout, exited (exitCode, signal, stderrTail),\n"
          "             protocol, too_large, tool_error (pluginMessage), disabled,\n"
          "             not_found or host. It is the last line: a show_notification\n"
          "             the plugin asks for during the call is answered {\"shown\":true}\n"
          "             and printed before it as a host_request event, as in serve.\n"
          "  serve      one host whose session folder is --cwd (default: the current\n"
          "             folder), with its plugin MCP server and view server running;\n"
          "             first {\"event\":\"ready\",...,\"mcp\":{\"url\",\"env\",\"headers\"},\n"
          "             \"views\":[{plugin,id,title,url}],\"panels\":[{plugin,title,url}]},\n"
          "             then host_request (the demo answers show_notification with\n"
          "             {\"shown\":true}, as in call; a viewId adds params.view\n"
          "             {id,title,url}), ui_push, plugin_started, plugin_exit,\n"
          "             plugin_disabled and views_changed events.\n"
          "             stdin commands, each answered by one {\"event\":\"result\"}:\n"
          "               call ID TOOL JSON | visible ID | options ID CONFIG_ID |\n"
          "               parse MIME FILE | startup-finished | unload ID | enable ID |\n"
          "               disable ID | scheme light|dark | stop\n"
          "             stop, EOF and " QCD_TERM_SIGNAL " end every plugin, print\n"
          "             {\"event\":\"stopped\"} and exit 0; stop's result follows it as\n"
          "             the last line (\"ok\":false and exit 1 if the host could not\n"
          "             be freed).\n"
          "  register-mcp  adds (--remove: removes) the qwen-companion-plugins entry\n"
          "             of Qwen Code's settings: user scope $QWEN_HOME/settings.json,\n"
          "             project scope ./.qwen/settings.json (the current folder is the\n"
          "             project). The entry starts the bridge --bridge PATH (default:\n"
          "             qc-mcp-bridge next to the loaded library). Prints\n"
          "             {\"ok\":true,\"settings\",\"change\",...,\"approve\"?} or\n"
          "             {\"ok\":false,\"error\":{\"status\",\"message\"}}\n"
          "Exit status: 0 success, 1 refused, 2 usage error.\n",
          f);
}

/* Options shared by every command; the other arguments are left in pos[]. */
typedef struct {
    const char *dir, *cwd, *timeout_ms, *scope, *bridge;
    int json, remove_data, remove, always_load;
    const char *pos[4];
    int npos;
} plugins_args;

/* Returns -1 when parsed, else the exit code (help, usage error). */
static int plugins_parse(int argc, char **argv, plugins_args *a, int max_pos)
{
    int i;
    uint32_t n;

    memset(a, 0, sizeof *a);
    for (i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            plugins_usage(stdout);
            return 0;
        }
        if (take_option(argc, argv, &i, "--dir", &a->dir) || take_option(argc, argv, &i, "--cwd", &a->cwd) ||
            take_option(argc, argv, &i, "--timeout-ms", &a->timeout_ms) ||
            take_option(argc, argv, &i, "--scope", &a->scope) || take_option(argc, argv, &i, "--bridge", &a->bridge))
            continue;
        if (strcmp(argv[i], "--remove") == 0) {
            a->remove = 1;
            continue;
        }
        if (strcmp(argv[i], "--always-load-tools") == 0) {
            a->always_load = 1;
            continue;
        }
        if (strcmp(argv[i], "--json") == 0) {
            a->json = 1;
            continue;
        }
        if (strcmp(argv[i], "--remove-data") == 0) {
            a->remove_data = 1;
            continue;
        }
        if (argv[i][0] == '-' && argv[i][1] == '-') {
            fprintf(stderr, QCDEMO_NAME " plugins %s: unknown option: %s\n", argv[2], argv[i]);
            return 2;
        }
        if (a->npos >= max_pos) {
            fprintf(stderr, QCDEMO_NAME " plugins %s: unexpected argument: %s\n", argv[2], argv[i]);
            return 2;
        }
        a->pos[a->npos++] = argv[i];
    }
    if (a->npos != max_pos) {
        fprintf(stderr, QCDEMO_NAME " plugins %s: missing arguments\n", argv[2]);
        plugins_usage(stderr);
        return 2;
    }
    if (a->timeout_ms != NULL &&
        (!parse_u32(a->timeout_ms, a->timeout_ms + strlen(a->timeout_ms), &n) || n < 50 || n > 3600000)) {
        fprintf(stderr, QCDEMO_NAME " plugins: --timeout-ms is a number of milliseconds (50..3600000)\n");
        return 2;
    }
    return -1;
}

/* ---- one-shot commands */

static int plugins_install(const plugins_args *a)
{
    qc_plugin_host *h = plugins_open(a->dir, NULL, NULL);
    char *out = NULL, *ej = NULL, *err = NULL;
    qc_status st;
    if (h == NULL)
        return 1;
    st = qc_plugin_host_install(h, a->pos[0], &out, &ej, &err);
    return plugins_close(h, print_outcome("plugin", "code", st, out, ej, err));
}

static int plugins_uninstall(const plugins_args *a)
{
    qc_plugin_host *h = plugins_open(a->dir, NULL, NULL);
    char *out = NULL, *ej = NULL, *err = NULL;
    qc_status st;
    if (h == NULL)
        return 1;
    st = qc_plugin_host_uninstall(h, a->pos[0], a->remove_data, &out, &ej, &err);
    return plugins_close(h, print_outcome(NULL, "code", st, out, ej, err));
}

static int plugins_list(const plugins_args *a)
{
    qc_plugin_host *h = plugins_open(a->dir, NULL, NULL);
    char *out = NULL, *ej = NULL, *err = NULL;
    qc_status st;
    jiter it;
    jspan p;

    if (h == NULL)
        return 1;
    st = qc_plugin_host_list(h, &out, &ej, &err);
    if (st != QC_OK)
        return plugins_close(h, print_outcome("plugins", "code", st, out, ej, err));
    if (a->json) {
        sbuf line = {0};
        sb_puts(&line, out);
        emit_line(&line);
        sb_free(&line);
    } else {
        js_iter(&it, js_doc(out));
        while (js_next(&it, &p)) {
            char *id = js_get_str(p, "id"), *version = js_get_str(p, "version"), *name = js_get_str(p, "name");
            jspan enabled;
            int on = js_get(p, "enabled", &enabled) && enabled.n == 4 && memcmp(enabled.p, "true", 4) == 0;
            printf("%-40s %-10s %-8s %s\n", id != NULL ? id : "?", version != NULL ? version : "-",
                   on ? "enabled" : "disabled", name != NULL ? name : "(broken)");
            free(id);
            free(version);
            free(name);
        }
        fflush(stdout);
    }
    qc_string_free(out);
    return plugins_close(h, 0);
}

/* {"cwd":…,"timeoutMs":…} or NULL when neither is given; free with sb_free. */
static const char *call_options(sbuf *b, const char *cwd, const char *timeout_ms)
{
    if (cwd == NULL && timeout_ms == NULL)
        return NULL;
    sb_putc(b, '{');
    if (cwd != NULL) {
        sb_puts(b, "\"cwd\":");
        sb_json_str(b, cwd);
    }
    if (timeout_ms != NULL)
        sb_printf(b, "%s\"timeoutMs\":%s", cwd != NULL ? "," : "", timeout_ms);
    sb_putc(b, '}');
    return b->data;
}

static int plugins_call(const plugins_args *a)
{
    qc_plugin_host *h;
    char *out = NULL, *ej = NULL, *err = NULL;
    sbuf opts = {0}, line = {0};
    qc_status st;
    int rc;

    h = plugins_open(a->dir, NULL, NULL);
    if (h == NULL)
        return 1;
    st = qc_plugin_host_call(h, a->pos[0], a->pos[1], a->pos[2], call_options(&opts, a->cwd, a->timeout_ms), &out,
                             &ej, &err);
    sb_free(&opts);
    if (st == QC_INVALID_JSON || st == QC_INVALID_UTF8 || st == QC_NULL_PARAMETER) {
        fprintf(stderr, QCDEMO_NAME " plugins call: %s: %s\n", qc_status_name(st), err != NULL ? err : "");
        qc_string_free(err);
        return plugins_close(h, 2);
    }
    /* Free the host first: that joins its callback thread, so the
     * host_request lines of this call are printed before the answer. */
    rc = plugins_close(h, st == QC_OK ? 0 : 1);
    sb_putc(&line, '{');
    sb_outcome(&line, "result", "kind", st, NULL, out, ej, err);
    sb_putc(&line, '}');
    emit_line(&line);
    sb_free(&line);
    return rc;
}

/* ---- register-mcp */

/* The default bridge: qc-mcp-bridge in the folder of the loaded library
 * (cargo builds both into target/release). NULL when it is not there. */
static char *default_bridge(void)
{
    sbuf path = {0};
    /* qc_version's string lives in the library's own memory. */
    char *dir = qcd_module_dir(qc_version());

    if (dir == NULL)
        return NULL;
    sb_puts(&path, dir);
    free(dir);
    sb_putc(&path, QCD_DIR_SEP);
    sb_puts(&path, "qc-mcp-bridge" QCD_EXE_SUFFIX);
    if (!qcd_is_executable(path.data)) {
        sb_free(&path);
        return NULL;
    }
    return path.data;
}

/* {"ok":false,"error":{"status":NAME,"message":MESSAGE}}; returns 1. */
static int print_refusal(qc_status st, const char *message)
{
    sbuf line = {0};
    sb_puts(&line, "{\"ok\":false,\"error\":{\"status\":");
    sb_json_str(&line, qc_status_name(st));
    sb_puts(&line, ",\"message\":");
    sb_json_str(&line, message != NULL ? message : "");
    sb_puts(&line, "}}");
    emit_line(&line);
    sb_free(&line);
    return 1;
}

static int plugins_register_mcp(const plugins_args *a)
{
    char cwd_buf[4096], *bridge = NULL, *out = NULL, *err = NULL;
    sbuf opts = {0};
    qc_status st;
    int rc;

    if (a->scope == NULL || (strcmp(a->scope, "user") != 0 && strcmp(a->scope, "project") != 0)) {
        fprintf(stderr, QCDEMO_NAME " plugins register-mcp: --scope user|project is required\n");
        return 2;
    }
    if (!qcd_getcwd(cwd_buf, sizeof cwd_buf))
        return print_refusal(QC_IO, "cannot read the current folder");
    if (!a->remove && a->bridge == NULL) {
        bridge = default_bridge();
        if (bridge == NULL)
            return print_refusal(QC_NOT_FOUND, "no qc-mcp-bridge next to the library (build it with cargo build "
                                               "--release, or give --bridge PATH)");
    }
    sb_puts(&opts, "{\"scope\":");
    sb_json_str(&opts, a->scope);
    sb_puts(&opts, ",\"project\":");
    sb_json_str(&opts, cwd_buf);
    if (!a->remove) {
        sb_puts(&opts, ",\"bridge\":");
        sb_json_str(&opts, a->bridge != NULL ? a->bridge : bridge);
        sb_printf(&opts, ",\"alwaysLoadTools\":%s", a->always_load ? "true" : "false");
    }
    sb_putc(&opts, '}');
    free(bridge);
    st = a->remove ? qc_mcp_unregister(opts.data, &out, &err) : qc_mcp_register(opts.data, &out, &err);
    sb_free(&opts);
    if (st == QC_OK) {
        sbuf line = {0};
        sb_puts(&line, out); /* already {"ok":true,…} */
        emit_line(&line);
        sb_free(&line);
        rc = 0;
    } else {
        rc = print_refusal(st, err);
    }
    qc_string_free(out);
    qc_string_free(err);
    return rc;
}

/* ---- serve */

typedef struct {
    qc_plugin_host *h;
    const char *cwd;
    /* The completion of the call under way (main thread waits on `cv`). */
    qcd_mutex mu;
    qcd_cond cv;
    int done;
} serve_state;

static const member_map ui_push_members[] = {{"plugin", "plugin"}, {"channel", "channel"}, {"payload", "payload"}};
static const member_map started_members[] = {{"plugin", "plugin"}, {"pid", "pid"}};
static const member_map exit_members[] = {{"plugin", "plugin"}, {"exitCode", "code"}, {"signal", "signal"},
                                          {"expected", "expected"}, {"stderrTail", "stderrTail"}};
static const member_map disabled_members[] = {{"plugin", "plugin"}, {"reason", "reason"}};

/* The library's events, as demo events (on the callback thread). */
static void serve_on_event(void *user_data, const char *json)
{
    static const struct {
        const char *type;
        const member_map *map;
        size_t n;
    } kinds[] = {
        {"ui_push", ui_push_members, COUNT_OF(ui_push_members)},
        {"plugin_started", started_members, COUNT_OF(started_members)},
        {"plugin_exit", exit_members, COUNT_OF(exit_members)},
        {"plugin_disabled", disabled_members, COUNT_OF(disabled_members)},
        {"views_changed", NULL, 0},
    };
    jspan doc = js_doc(json);
    char *type = js_get_str(doc, "type");
    sbuf line = {0};
    size_t i;

    (void)user_data;
    for (i = 0; type != NULL && i < COUNT_OF(kinds); i++) {
        if (strcmp(type, kinds[i].type) != 0)
            continue;
        sb_puts(&line, "{\"event\":");
        sb_json_str(&line, type);
        sb_copy_members(&line, doc, kinds[i].map, kinds[i].n);
        sb_putc(&line, '}');
        emit_line(&line);
    }
    sb_free(&line);
    free(type);
}

/* Prints {"event":"result","command":VERB,"ok":…} (see sb_outcome). */
static void serve_result(const char *verb, const char *field, qc_status st, const char *value, char *out, char *ej,
                         char *err)
{
    sbuf line = {0};
    sb_puts(&line, "{\"event\":\"result\",\"command\":");
    sb_json_str(&line, verb);
    sb_putc(&line, ',');
    sb_outcome(&line, field, "kind", st, value, out, ej, err);
    sb_putc(&line, '}');
    emit_line(&line);
    sb_free(&line);
}

/* A command the demo refuses before calling the library. */
static void serve_refuse(const char *verb, qc_status st, const char *message)
{
    serve_result(verb, NULL, st, message, NULL, NULL, NULL);
}

/* The answer to `stop`, printed once the host ended every plugin: the last
 * line, after {"event":"stopped"}; or, when the host could not be freed,
 * {…,"ok":false,"error":{"kind":"host","message","status"}} (exit 1). */
static void serve_stop_result(qc_status st)
{
    sbuf line = {0};
    sb_puts(&line, "{\"event\":\"result\",\"command\":\"stop\",");
    if (st == QC_OK) {
        sb_puts(&line, "\"ok\":true}");
    } else {
        sb_puts(&line, "\"ok\":false,\"error\":{\"kind\":\"host\",\"message\":\"the plugin host could not be "
                       "freed\",\"status\":");
        sb_json_str(&line, qc_status_name(st));
        sb_puts(&line, "}}");
    }
    emit_line(&line);
    sb_free(&line);
}

/* The completion of `call`: {"ok":…} becomes the result line. */
static void serve_on_done(void *user_data, const char *json)
{
    serve_state *s = user_data;
    sbuf line = {0};

    sb_puts(&line, "{\"event\":\"result\",\"command\":\"call\",");
    sb_puts(&line, json + 1); /* the library's {"ok":…,…} members */
    emit_line(&line);
    sb_free(&line);
    qcd_mutex_lock(&s->mu);
    s->done = 1;
    qcd_cond_signal(&s->cv);
    qcd_mutex_unlock(&s->mu);
}

/* Splits off the first space-separated word of *rest (NULL if none). */
static char *next_word(char **rest)
{
    char *w = *rest, *sp;
    while (*w == ' ')
        w++;
    if (*w == '\0')
        return NULL;
    sp = strchr(w, ' ');
    if (sp != NULL) {
        *sp = '\0';
        *rest = sp + 1;
    } else {
        *rest = w + strlen(w);
    }
    return w;
}

static void serve_cmd_call(void *ctx, const char *verb, char *arg)
{
    serve_state *s = ctx;
    char *id = next_word(&arg), *tool = next_word(&arg), *err = NULL;
    qc_status st;

    if (id == NULL || tool == NULL || *arg == '\0') {
        serve_refuse(verb, QC_NULL_PARAMETER, "missing argument (usage: call ID TOOL JSON)");
        return;
    }
    s->done = 0;
    st = qc_plugin_host_call_async(s->h, id, tool, arg, NULL, serve_on_done, s, NULL, &err);
    if (st != QC_OK) {
        serve_result(verb, NULL, st, NULL, NULL, NULL, err);
        return;
    }
    qcd_mutex_lock(&s->mu);
    while (!s->done)
        qcd_cond_wait(&s->cv, &s->mu);
    qcd_mutex_unlock(&s->mu);
}

static void serve_cmd_visible(void *ctx, const char *verb, char *arg)
{
    serve_state *s = ctx;
    char *ej = NULL, *err = NULL;
    int32_t visible = 0;
    qc_status st;

    if (!require_arg(verb, arg, "ID"))
        return;
    st = qc_plugin_host_visible(s->h, arg, s->cwd, &visible, &ej, &err);
    serve_result(verb, "visible", st, st == QC_OK ? (visible ? "true" : "false") : NULL, NULL, ej, err);
}

static void serve_cmd_options(void *ctx, const char *verb, char *arg)
{
    serve_state *s = ctx;
    char *id = next_word(&arg), *config = next_word(&arg), *out = NULL, *ej = NULL, *err = NULL;
    qc_status st;

    if (id == NULL || config == NULL) {
        serve_refuse(verb, QC_NULL_PARAMETER, "missing argument (usage: options ID CONFIG_ID)");
        return;
    }
    st = qc_plugin_host_options(s->h, id, config, &out, &ej, &err);
    serve_result(verb, "options", st, NULL, out, ej, err);
}

static void serve_cmd_parse(void *ctx, const char *verb, char *arg)
{
    serve_state *s = ctx;
    char *mime = next_word(&arg), *out = NULL, *ej = NULL, *err = NULL, *data;
    size_t len = 0;
    qc_status st;

    if (mime == NULL || *arg == '\0') {
        serve_refuse(verb, QC_NULL_PARAMETER, "missing argument (usage: parse MIME FILE)");
        return;
    }
    data = read_file(arg, &len);
    if (data == NULL) {
        sbuf m = {0};
        sb_printf(&m, "cannot read %s: %s", arg, strerror(errno));
        serve_refuse(verb, QC_IO, m.data);
        sb_free(&m);
        return;
    }
    st = qc_plugin_host_parse_document(s->h, mime, (const uint8_t *)data, len, &out, &ej, &err);
    free(data);
    serve_result(verb, "parsed", st, NULL, out, ej, err);
}

static void serve_cmd_startup(void *ctx, const char *verb, char *arg)
{
    serve_state *s = ctx;
    char *out = NULL, *err = NULL;
    qc_status st;
    (void)arg;
    st = qc_plugin_host_startup_finished(s->h, &out, &err);
    serve_result(verb, "started", st, NULL, out, NULL, err);
}

/* unload / enable / disable ID */
static void serve_cmd_plugin(void *ctx, const char *verb, char *arg)
{
    serve_state *s = ctx;
    char *ej = NULL, *err = NULL;
    qc_status st;

    if (!require_arg(verb, arg, "ID"))
        return;
    if (strcmp(verb, "unload") == 0)
        st = qc_plugin_host_unload(s->h, arg, &ej, &err);
    else if (strcmp(verb, "enable") == 0)
        st = qc_plugin_host_enable(s->h, arg, &err);
    else
        st = qc_plugin_host_disable(s->h, arg, &err);
    serve_result(verb, NULL, st, NULL, NULL, ej, err);
}

/* scheme light|dark: the colour scheme the view server's pages see. */
static void serve_cmd_scheme(void *ctx, const char *verb, char *arg)
{
    serve_state *s = ctx;
    char *err = NULL, quoted[16];
    qc_status st;

    if (!require_arg(verb, arg, "light|dark"))
        return;
    st = qc_plugin_host_set_color_scheme(s->h, arg, &err);
    /* On success arg is "light" or "dark" (the library checked it). */
    snprintf(quoted, sizeof quoted, "\"%s\"", st == QC_OK ? arg : "");
    serve_result(verb, "colorScheme", st, st == QC_OK ? quoted : NULL, NULL, NULL, err);
}

static const demo_command serve_commands[] = {
    {"call", serve_cmd_call},       {"visible", serve_cmd_visible},         {"options", serve_cmd_options},
    {"parse", serve_cmd_parse},     {"startup-finished", serve_cmd_startup}, {"unload", serve_cmd_plugin},
    {"enable", serve_cmd_plugin},   {"disable", serve_cmd_plugin},          {"scheme", serve_cmd_scheme},
};

static int plugins_serve(const plugins_args *a)
{
    serve_state s;
    qcd_sigmask wait_mask;
    static const member_map mcp_members[] = {{"url", "url"}, {"env", "env"}, {"headers", "headers"},
                                             {"lockFile", "lockFile"}, {"tools", "tools"}};
    static const member_map views_members[] = {{"views", "views"}, {"panels", "panels"}};
    char cwd_buf[4096], abs_cwd[4096], *list = NULL, *dir = NULL, *err = NULL, *info = NULL, *views = NULL;
    sbuf line = {0}, mcfg = {0};
    jiter it;
    jspan p;
    int first = 1, by_stop;
    qc_status st;

    /* Before the library starts any thread. */
    qcd_setup_signals(&wait_mask);
    memset(&s, 0, sizeof s);
    qcd_mutex_init(&s.mu);
    qcd_cond_init(&s.cv);
    s.cwd = a->cwd;
    if (s.cwd == NULL)
        s.cwd = qcd_getcwd(cwd_buf, sizeof cwd_buf) ? cwd_buf : "";
    s.h = plugins_open(a->dir, a->timeout_ms, s.cwd);
    if (s.h == NULL)
        return 1;
    if (!check_status("set_event_callback", qc_plugin_host_set_event_callback(s.h, serve_on_event, &s, NULL, &err),
                      &err) ||
        !check_status("plugins_dir", qc_plugin_host_plugins_dir(s.h, &dir, &err), &err) ||
        !check_status("list", qc_plugin_host_list(s.h, &list, NULL, &err), &err)) {
        qc_string_free(dir);
        return plugins_close(s.h, 1);
    }
    /* The plugin MCP server; its lock file names the session folder. */
    sb_puts(&mcfg, "{\"workspacePaths\":[");
    sb_json_str(&mcfg, qcd_realpath(s.cwd, abs_cwd, sizeof abs_cwd) ? abs_cwd : s.cwd);
    sb_puts(&mcfg, "]}");
    if (!check_status("mcp_start", qc_plugin_host_mcp_start(s.h, mcfg.data, &err), &err) ||
        !check_status("mcp_info", qc_plugin_host_mcp_info(s.h, &info, &err), &err)) {
        sb_free(&mcfg);
        qc_string_free(dir);
        qc_string_free(list);
        return plugins_close(s.h, 1);
    }
    sb_free(&mcfg);
    /* The view server: the plugins' pages with window.pluginHost. */
    if (!check_status("views_start", qc_plugin_host_views_start(s.h, NULL, &views, &err), &err)) {
        qc_string_free(info);
        qc_string_free(dir);
        qc_string_free(list);
        return plugins_close(s.h, 1);
    }
    sb_puts(&line, "{\"event\":\"ready\",\"pluginsDir\":");
    sb_json_str(&line, dir);
    sb_puts(&line, ",\"cwd\":");
    sb_json_str(&line, s.cwd);
    sb_puts(&line, ",\"plugins\":[");
    js_iter(&it, js_doc(list));
    while (js_next(&it, &p)) {
        jspan id;
        if (!js_get(p, "id", &id))
            continue;
        if (!first)
            sb_putc(&line, ',');
        sb_putn(&line, id.p, id.n);
        first = 0;
    }
    sb_puts(&line, "],\"mcp\":{\"serverName\":\"qwen-companion-plugins\"");
    sb_copy_members(&line, js_doc(info), mcp_members, COUNT_OF(mcp_members));
    sb_putc(&line, '}');
    sb_copy_members(&line, js_doc(views), views_members, COUNT_OF(views_members));
    sb_putc(&line, '}');
    emit_line(&line);
    sb_free(&line);
    qc_string_free(views);
    qc_string_free(info);
    qc_string_free(list);
    qc_string_free(dir);

    by_stop = command_loop(&wait_mask, serve_commands, COUNT_OF(serve_commands), &s);
    report_stop_signal();
    /* Ends every plugin (and its descendants) before returning. */
    st = qc_plugin_host_free(s.h);
    qcd_cond_destroy(&s.cv);
    qcd_mutex_destroy(&s.mu);
    if (st != QC_OK) {
        if (by_stop)
            serve_stop_result(st);
        else
            emit_error("plugin_host_free failed: %s", qc_status_name(st));
        return 1;
    }
    emit_stopped();
    if (by_stop)
        serve_stop_result(QC_OK);
    return 0;
}

int qcdemo_plugins_main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int npos;
        int (*fn)(const plugins_args *);
    } cmds[] = {
        {"install", 1, plugins_install}, {"uninstall", 1, plugins_uninstall}, {"list", 0, plugins_list},
        {"call", 3, plugins_call},       {"serve", 0, plugins_serve}, {"register-mcp", 0, plugins_register_mcp},
    };
    plugins_args a;
    size_t i;
    int rc;

    if (argc < 3 || strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0 || strcmp(argv[2], "help") == 0) {
        plugins_usage(argc < 3 ? stderr : stdout);
        return argc < 3 ? 2 : 0;
    }
    for (i = 0; i < COUNT_OF(cmds); i++) {
        if (strcmp(argv[2], cmds[i].name) != 0)
            continue;
        rc = plugins_parse(argc, argv, &a, cmds[i].npos);
        return rc >= 0 ? rc : cmds[i].fn(&a);
    }
    fprintf(stderr, QCDEMO_NAME " plugins: unknown command: %s\n", argv[2]);
    plugins_usage(stderr);
    return 2;
}
