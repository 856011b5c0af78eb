/*
 * qcdemo_sessions.c — `qcdemo sessions ps|listen|send`: the demo joins Qwen
 * Code's cross-session messaging as a participant (qc_participant_*): it
 * lists the live sessions, receives messages (with the hold / release / deny
 * decisions of its user), sends and follows receipts (see sessions_usage).
 *
 * While the main thread sends a message, events from callbacks wait in a
 * buffer (under out_lock) so that "sent" precedes its receipts.
 */
#include "qcdemo_common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MESSAGING_SOCKET_ENV "QWEN_CODE_MESSAGING_SOCKET"
#define MESSAGING_TOKEN_ENV "QWEN_CODE_MESSAGING_TOKEN"

typedef struct {
    qc_participant *p;
    char *session_id; /* our registered session */
    int one_shot; /* `sessions send`: nothing is printed after a final receipt */
    const qcd_sigmask *wait_mask;
    /* Under out_lock: */
    int deferring; /* a send (or registration) is under way: events wait in `deferred` */
    int finished;  /* print no more events */
    sbuf deferred;
    qcd_wake wake; /* one-shot: signalled when a final receipt arrived */
    /* Touched by the callback thread only (and after the participant is freed): */
    char **held_ids; /* held messages already reported */
    size_t held_n;
} sess_demo;

/* Print an event from a callback: now, or after the line of the send (or the
 * ready event) the main thread is producing, so that it comes first. */
static void sess_emit(sess_demo *d, const sbuf *line)
{
    qcd_mutex_lock(&out_lock);
    if (!d->finished) {
        if (d->deferring) {
            sb_putn(&d->deferred, line->data, line->len);
            sb_putc(&d->deferred, '\n');
        } else {
            write_line_locked(line);
        }
    }
    qcd_mutex_unlock(&out_lock);
}

static void sess_defer_begin(sess_demo *d)
{
    qcd_mutex_lock(&out_lock);
    d->deferring = 1;
    qcd_mutex_unlock(&out_lock);
}

/* Print `line` (if not NULL), then whatever the callbacks printed meanwhile. */
static void sess_defer_end(sess_demo *d, const sbuf *line)
{
    qcd_mutex_lock(&out_lock);
    if (line != NULL)
        write_line_locked(line);
    if (d->deferred.len > 0) {
        fwrite(d->deferred.data, 1, d->deferred.len, stdout);
        fflush(stdout);
        d->deferred.len = 0;
        d->deferred.data[0] = '\0';
    }
    d->deferring = 0;
    qcd_mutex_unlock(&out_lock);
}

/* The members of the events, in their order: {event member, library member}. */
static const member_map message_members[] = {
    {"origin", "origin"}, {"controller", "controllerLabel"}, {"frame", "frame"}};
static const member_map held_members[] = {
    {"msgId", "msgId"}, {"sessionId", "sessionId"}, {"origin", "origin"}, {"controller", "controllerLabel"},
    {"cause", "cause"}, {"heldAt", "heldAt"}, {"expiresAt", "expiresAt"}, {"frame", "frame"}};
static const member_map receipt_members[] = {
    {"msgId", "msgId"}, {"status", "status"}, {"previous", "previous"}, {"frame", "frame"}};
static const member_map ready_members[] = {
    {"record", "recordPath"}, {"sessionId", "sessionId"}, {"ref", "ref"}, {"name", "name"}, {"ipcPath", "ipcPath"}};

/* Print {"event":EVENT,<the members of obj that map lists>} from a callback. */
static void sess_emit_event(sess_demo *d, const char *event, jspan obj, const member_map *map, size_t n)
{
    sbuf line = {0};

    sb_puts(&line, "{\"event\":");
    sb_json_str(&line, event);
    sb_copy_members(&line, obj, map, n);
    sb_putc(&line, '}');
    sess_emit(d, &line);
    sb_free(&line);
}

/* A delivered message: {"event":"message","origin","controller"?,"frame"}. */
static void sess_on_message(void *user_data, const char *json)
{
    sess_emit_event(user_data, "message", js_doc(json), message_members, COUNT_OF(message_members));
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
        if (!known)
            sess_emit_event(d, "held", e, held_members, COUNT_OF(held_members));
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
    char *status = js_get_str(doc, "status");
    int final = status != NULL && strcmp(status, "pending") != 0 && strcmp(status, "held") != 0;

    free(status);
    sess_emit_event(d, "receipt", doc, receipt_members, COUNT_OF(receipt_members));
    if (final && d->one_shot) {
        qcd_mutex_lock(&out_lock);
        d->finished = 1;
        qcd_mutex_unlock(&out_lock);
        qcd_wake_signal(&d->wake);
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
            sb_copy_members(&line, doc, ready_members, COUNT_OF(ready_members));
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

/* ---- `sessions listen`: stdin commands (demo_cmd_fn: ctx is the sess_demo) */

static void sess_cmd_send(void *ctx, const char *verb, char *arg)
{
    sess_demo *d = ctx;
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

/* release MSGID | deny MSGID: the user's decision on a held message. */
static void sess_decide(sess_demo *d, const char *verb, const char *msg_id,
                        qc_status (*decide)(qc_participant *p, const char *msg_id, char **error))
{
    char *err = NULL;
    if (require_arg(verb, msg_id, "MSGID"))
        check_status(verb, decide(d->p, msg_id, &err), &err);
}

static void sess_cmd_release(void *ctx, const char *verb, char *arg)
{
    sess_decide(ctx, verb, arg, qc_participant_release);
}

static void sess_cmd_deny(void *ctx, const char *verb, char *arg)
{
    sess_decide(ctx, verb, arg, qc_participant_deny);
}

/*
 * run COMMAND: run `/bin/sh -c COMMAND` (Windows: cmd.exe) as a process this
 * session started (QWEN_CODE_MESSAGING_SOCKET/_TOKEN set to our inbox and
 * child token; its messages to us arrive as "own-process"), stdin from the
 * null device and stdout to our stderr (redirect inside COMMAND to keep it),
 * and wait for it (qcd_run_shell).
 */
static void sess_cmd_run(void *ctx, const char *verb, char *arg)
{
    sess_demo *d = ctx;
    char *env_json = NULL, *err = NULL, *sock = NULL, *tok = NULL;
    const char *set_env[2];
    sbuf e_sock = {0}, e_tok = {0}, line = {0};
    char why[512];
    int code = 0, how;

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
    set_env[0] = e_sock.data;
    set_env[1] = e_tok.data;
    how = qcd_run_shell(arg, set_env, COUNT_OF(set_env), d->wait_mask, &code, why, sizeof why);
    /* The token is in these buffers: clear them before freeing. */
    memset(e_tok.data, 0, e_tok.len);
    sb_free(&e_sock);
    sb_free(&e_tok);
    if (how == QCD_RUN_FAILED) {
        emit_error("%s: %s", verb, why);
        return;
    }
    sb_puts(&line, "{\"event\":\"ran\",\"command\":");
    sb_json_str(&line, arg);
    sb_printf(&line, how == QCD_RUN_EXITED ? ",\"exitCode\":%d}" : ",\"signal\":%d}", code);
    emit_line(&line);
    sb_free(&line);
}

/* `stop` is command_loop's own. */
static const demo_command sess_commands[] = {
    {"send", sess_cmd_send},
    {"release", sess_cmd_release},
    {"deny", sess_cmd_deny},
    {"run", sess_cmd_run},
};

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
          "    run COMMAND                         run " QCD_SHELL_DESC ", and wait for it,\n"
          "                                        as a process this session started (its\n"
          "                                        messages to us are own-process); its\n"
          "                                        stdout goes to our stderr\n"
          "    stop\n"
          "  EOF, stop, " QCD_STOP_SIGNALS " unregister cleanly (held messages\n"
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
    now = qcd_realtime_ms();
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
    qcd_sigmask wait_mask;
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
    qcd_setup_signals(&wait_mask);
    memset(&d, 0, sizeof d);
    d.wait_mask = &wait_mask;

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
        command_loop(&wait_mask, sess_commands, COUNT_OF(sess_commands), &d);
        report_stop_signal();
    }
    sb_free(&config);
    if (!sess_stop(&d))
        rc = 1;
    emit_stopped();
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
    qcd_sigmask wait_mask;
    double deadline;
    int werr;

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

    qcd_setup_signals(&wait_mask);
    memset(&d, 0, sizeof d);
    d.wait_mask = &wait_mask;
    d.one_shot = 1;
    werr = qcd_wake_open(&d.wake);
    if (werr != 0) {
        emit_error("pipe: %s", strerror(werr));
        sb_free(&text);
        return 1;
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
        deadline = qcd_monotonic_s() + wait_s;
        while (sent && !stop_signal) {
            double left;
            int finished;

            qcd_mutex_lock(&out_lock);
            finished = d.finished;
            qcd_mutex_unlock(&out_lock);
            if (finished)
                break;
            left = deadline - qcd_monotonic_s();
            if (left < 0)
                break;
            qcd_wake_wait(&d.wake, left, &wait_mask);
        }
        report_stop_signal();
    }
    /* No more events: the wait is over. */
    qcd_mutex_lock(&out_lock);
    d.finished = 1;
    qcd_mutex_unlock(&out_lock);
    if (!sess_stop(&d))
        ok = 0;
    qcd_wake_close(&d.wake);
    sb_free(&text);
    sb_free(&config);
    return ok && sent ? 0 : 1;
}

int qcdemo_sessions_main(int argc, char **argv)
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
