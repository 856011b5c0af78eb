package qwen.companion

import com.sun.jna.Pointer
import com.sun.jna.ptr.PointerByReference

/** `inboundPolicy`: what a session does with peer messages (unset = mode parity). */
enum class InboundPolicy(val wire: String) {
    ACCEPT("accept"), HOLD("hold"), REFUSE("refuse");

    companion object {
        /** The policy for a wire value, or `null` (unset / unknown value). */
        @JvmStatic
        fun fromWire(s: Any?): InboundPolicy? = values().firstOrNull { it.wire == s }
    }
}

/** A review class (`reviewClass`, `fromMode`): whether a user reviews each action. */
enum class ReviewClass(val wire: String) {
    PROMPTING("prompting"), BYPASS("bypass");

    companion object {
        /** The class for a wire value, or `null` (unknown). */
        @JvmStatic
        fun fromWire(s: Any?): ReviewClass? = values().firstOrNull { it.wire == s }
    }
}

/** `heldExpiry`: how long held messages wait for the host's decision. */
enum class HeldExpiry(val wire: String) {
    ONE_MINUTE("1m"), FIVE_MINUTES("5m"), TEN_MINUTES("10m"), NEVER("never");

    companion object {
        /** The expiry for a wire value, or `null`. */
        @JvmStatic
        fun fromWire(s: Any?): HeldExpiry? = values().firstOrNull { it.wire == s }
    }
}

/** Message priority (`now` interrupts, `next` waits for the current turn). */
enum class Priority(val wire: String) {
    NOW("now"), NEXT("next")
}

/**
 * Configuration of a participant (the `config_json` of `qc_participant_new`).
 * `null` leaves a field at the library's default, except [reviewClass], which
 * is always sent: `null` there means "unknown" (peer messages are held).
 */
data class QwenParticipantConfig @JvmOverloads constructor(
    /** The Qwen directory to join (default `$QWEN_HOME`, else `~/.qwen`). */
    val qwenHome: String? = null,
    /** `kind` of our records (default `external`; `^[a-z][a-z0-9-]{0,15}$`). */
    val kind: String? = null,
    /** Free text written as `qwenVersion`. */
    val version: String? = null,
    /** Several sessions behind one inbox, one `<pid>-<8hex>.json` record each. */
    val multiSession: Boolean? = null,
    /** Default inbound policy (null = mode parity). */
    val inboundPolicy: InboundPolicy? = null,
    /** Our review class for mode parity; null = unknown. */
    val reviewClass: ReviewClass? = ReviewClass.PROMPTING,
    /** How long held messages wait (library default 5 minutes). */
    val heldExpiry: HeldExpiry? = null,
    /** Delivered messages stay queued until [QwenParticipant.ack]. */
    val manualAck: Boolean? = null,
    /** Controller token (`qpc_…`) presented on sends with `controller = true`. */
    val controllerToken: String? = null,
    /** The parent session's inbox (default `$QWEN_CODE_MESSAGING_SOCKET`). */
    val parentSocket: String? = null,
    /** The parent session's child token (default `$QWEN_CODE_MESSAGING_TOKEN`). */
    val parentToken: String? = null,
    /** Remove records and sockets at normal process exit (library default true). */
    val cleanupAtExit: Boolean? = null,
    /** Test override: bind the inbox here. */
    val socketPath: String? = null,
    /** Test override: used instead of `$XDG_RUNTIME_DIR`. */
    val runtimeDir: String? = null,
    /** Test override: used instead of `$TMPDIR`. */
    val tmpDir: String? = null,
    /** Test override: sweep orphaned sockets after binding (library default true). */
    val sweepSockets: Boolean? = null,
    /** Test override: line deadline of inbox connections in ms. */
    val lineDeadlineMs: Long? = null
) {
    /** The JSON object given to `qc_participant_new`. */
    fun toJson(): String {
        val m = LinkedHashMap<String, Any?>()
        if (qwenHome != null) m["qwenHome"] = qwenHome
        if (kind != null) m["kind"] = kind
        if (version != null) m["version"] = version
        if (multiSession != null) m["multiSession"] = multiSession
        if (inboundPolicy != null) m["inboundPolicy"] = inboundPolicy.wire
        m["reviewClass"] = reviewClass?.wire
        if (heldExpiry != null) m["heldExpiry"] = heldExpiry.wire
        if (manualAck != null) m["manualAck"] = manualAck
        if (controllerToken != null) m["controllerToken"] = controllerToken
        if (parentSocket != null) m["parentSocket"] = parentSocket
        if (parentToken != null) m["parentToken"] = parentToken
        if (cleanupAtExit != null) m["cleanupAtExit"] = cleanupAtExit
        if (socketPath != null) m["socketPath"] = socketPath
        if (runtimeDir != null) m["runtimeDir"] = runtimeDir
        if (tmpDir != null) m["tmpDir"] = tmpDir
        if (sweepSockets != null) m["sweepSockets"] = sweepSockets
        if (lineDeadlineMs != null) m["lineDeadlineMs"] = lineDeadlineMs
        return Json.write(m)
    }
}

/** Options of one registration (`qc_participant_register`); null = the default. */
data class RegisterOptions @JvmOverloads constructor(
    /** Default: a fresh UUID. */
    val sessionId: String? = null,
    /** Display name; default derived from [cwd] as Qwen derives it. */
    val name: String? = null,
    /** Working directory recorded (default: the process's). */
    val cwd: String? = null,
    /** Overrides the config's `kind`. */
    val kind: String? = null,
    /** Overrides the config's inbound policy for this session. */
    val inboundPolicy: InboundPolicy? = null,
    /** Overrides the config's review class for this session. */
    val reviewClass: ReviewClass? = null,
    /** Overrides the config's held expiry for this session. */
    val heldExpiry: HeldExpiry? = null
) {
    fun toJson(): String {
        val m = LinkedHashMap<String, Any?>()
        if (sessionId != null) m["sessionId"] = sessionId
        if (name != null) m["name"] = name
        if (cwd != null) m["cwd"] = cwd
        if (kind != null) m["kind"] = kind
        if (inboundPolicy != null) m["inboundPolicy"] = inboundPolicy.wire
        if (reviewClass != null) m["reviewClass"] = reviewClass.wire
        if (heldExpiry != null) m["heldExpiry"] = heldExpiry.wire
        return Json.write(m)
    }
}

/**
 * How one session treats inbound messages (`qc_participant_inbound_settings_json`).
 * [policy] null = mode parity; [reviewClass] null = unknown.
 */
data class InboundSettings @JvmOverloads constructor(
    val policy: InboundPolicy? = null,
    val reviewClass: ReviewClass? = ReviewClass.PROMPTING,
    val heldExpiry: HeldExpiry = HeldExpiry.FIVE_MINUTES
) {
    fun toJson(): String = Json.write(mapOf("policy" to policy?.wire, "reviewClass" to reviewClass?.wire, "heldExpiry" to heldExpiry.wire))

    companion object {
        /** From the library's JSON object. */
        @JvmStatic
        fun fromJson(json: String): InboundSettings {
            val m = Json.parseObject(json)
            return InboundSettings(
                InboundPolicy.fromWire(m["policy"]),
                ReviewClass.fromWire(m["reviewClass"]),
                HeldExpiry.fromWire(m["heldExpiry"]) ?: HeldExpiry.FIVE_MINUTES
            )
        }
    }
}

/**
 * A cross-session participant: joins Qwen Code's cross-session messaging as a
 * peer. One inbox (a UNIX socket) plus one registry record per registered
 * session; other sessions find it with `qwen sessions ps` and send it
 * messages, and it sends them messages and follows their delivery receipts.
 * Nothing is bound or written before the first [register].
 *
 * Results are the library's JSON documents as [Map]s and [List]s (see [Json])
 * with its camelCase keys (`sessionId`, `msgId`, `recordPath`…); the fields are
 * listed in include/qwen_companion.h.
 *
 * Threading: every method may be called from any thread, including from
 * inside the handlers. Handlers ([onMessage], [onReceipt], [onHeld], the log
 * handler) run on the participant's own library thread (named `qc-cb`), one
 * at a time, in order; they must not block the UI thread's work and should
 * post UI updates to the UI thread. [send] blocks up to about 5 s and [wait]
 * up to its timeout. A handler that throws is contained (the throwable is
 * reported to the log handler at [LogLevel.ERROR]); nothing ever unwinds into
 * native code. With the default `manualAck = false` a message counts as
 * consumed when [onMessage]'s handler returns, even by throwing.
 *
 * Lifetime: [close] unregisters every session at once (held and queued
 * messages settle as `expired`, records and the socket are removed; a [wait]
 * on another thread returns) and frees the native object once no call is
 * running on another thread. It is idempotent and allowed inside a handler.
 * An object garbage-collected without [close] is freed by a `Cleaner`.
 */
class QwenParticipant private constructor(
    configJson: String?,
    /** The loaded native library. */
    val library: QwenCompanionLibrary,
    @Suppress("UNUSED_PARAMETER") marker: Unit
) : AutoCloseable {

    /**
     * Creates a participant (nothing bound or written yet).
     * @throws QwenCompanionException.Load if the library cannot be loaded,
     * @throws QwenCompanionException.Call e.g. `INVALID_JSON` for a bad config value.
     */
    @JvmOverloads
    constructor(
        config: QwenParticipantConfig = QwenParticipantConfig(),
        library: QwenCompanionLibrary = QwenCompanionLibrary.load()
    ) : this(config.toJson(), library, Unit)

    private val n: QcNative = library.native
    private val handle = NativeHandle(
        this, "QwenParticipant", library, "qc_participant_new", configJson,
        QcNative::qc_participant_new, QcNative::qc_participant_free
    )

    /** True after [close]. */
    val isClosed: Boolean get() = handle.isClosed

    private fun outObject(function: String, f: (Pointer, PointerByReference, PointerByReference) -> Int): Map<String, Any?> =
        Json.parseObject(handle.outString(function, f))

    private fun outArray(function: String, f: (Pointer, PointerByReference, PointerByReference) -> Int): List<Map<String, Any?>> =
        asObjects(Json.parse(handle.outString(function, f)))

    private fun arg(s: String, function: String, what: String): ByteArray = CStrings.arg(s, function, what)

    private fun optArg(s: String?, function: String, what: String): ByteArray? = if (s == null) null else CStrings.arg(s, function, what)

    // ---- our sessions ------------------------------------------------------

    /**
     * Registers a session (binds the inbox on the first one, then writes its
     * record). Returns `sessionId`, `ref`, `name`, `kind`, `cwd`, `startedAt`,
     * `recordPath`, `ipcPath`.
     */
    @JvmOverloads
    fun register(options: RegisterOptions = RegisterOptions()): Map<String, Any?> {
        val j = CStrings.terminated(options.toJson())
        return outObject("qc_participant_register") { h, out, err -> n.qc_participant_register(h, j, out, err) }
    }

    /** Registers a session named [name] (other options default). */
    fun register(name: String): Map<String, Any?> = register(RegisterOptions(name = name))

    /** Unregisters [sessionId]: held and queued messages settle as `expired`; its record is removed. */
    fun unregister(sessionId: String) {
        val s = arg(sessionId, "qc_participant_unregister", "sessionId")
        handle.call("qc_participant_unregister") { h, err -> n.qc_participant_unregister(h, s, err) }
    }

    /** Unregisters every session and closes the inbox; the handle stays valid (`qc_participant_close`). */
    fun unregisterAll() = handle.call("qc_participant_close") { h, err -> n.qc_participant_close(h, err) }

    /** Gives [sessionId] a new id ([newSessionId] or a fresh UUID), rewriting the same record. */
    @JvmOverloads
    fun rotateSessionId(sessionId: String, newSessionId: String? = null): Map<String, Any?> {
        val s = arg(sessionId, "qc_participant_rotate_session_id", "sessionId")
        val ns = optArg(newSessionId, "qc_participant_rotate_session_id", "newSessionId")
        return outObject("qc_participant_rotate_session_id") { h, out, err -> n.qc_participant_rotate_session_id(h, s, ns, out, err) }
    }

    /** Our registered sessions (as [register] returns them). */
    fun sessions(): List<Map<String, Any?>> =
        outArray("qc_participant_sessions_json") { h, out, err -> n.qc_participant_sessions_json(h, out, err) }

    /**
     * The environment for processes started on behalf of [sessionId]
     * (`QWEN_CODE_MESSAGING_SOCKET`, `QWEN_CODE_MESSAGING_TOKEN`); their
     * messages arrive with origin `own-process`. Keep the token out of logs.
     */
    fun childEnv(sessionId: String): Map<String, String> {
        val s = arg(sessionId, "qc_participant_child_env_json", "sessionId")
        val m = outObject("qc_participant_child_env_json") { h, out, err -> n.qc_participant_child_env_json(h, s, out, err) }
        val env = LinkedHashMap<String, String>()
        for ((k, v) in m) env[k] = v?.toString() ?: ""
        return env
    }

    /** The inbox socket path, or null while no session is registered. */
    fun ipcPath(): String? = try {
        handle.outString("qc_participant_ipc_path") { h, out, err -> n.qc_participant_ipc_path(h, out, err) }
    } catch (e: QwenCompanionException.Call) {
        if (e.status == QcStatus.NOT_RUNNING) null else throw e
    }

    /** The inbound settings of [sessionId]. */
    fun inboundSettings(sessionId: String): InboundSettings = InboundSettings.fromJson(inboundSettingsJson(sessionId))

    /** The inbound settings of [sessionId] as the library's JSON. */
    fun inboundSettingsJson(sessionId: String): String {
        val s = arg(sessionId, "qc_participant_inbound_settings_json", "sessionId")
        return handle.outString("qc_participant_inbound_settings_json") { h, out, err -> n.qc_participant_inbound_settings_json(h, s, out, err) }
    }

    /** Replaces the inbound settings of [sessionId]; held messages are judged again. */
    fun updateInbound(sessionId: String, settings: InboundSettings) = updateInboundJson(sessionId, settings.toJson())

    /** Replaces the inbound settings of [sessionId] with a raw JSON document (`INVALID_JSON` when bad). */
    fun updateInboundJson(sessionId: String, settingsJson: String) {
        val s = arg(sessionId, "qc_participant_update_inbound", "sessionId")
        val j = CStrings.terminated(settingsJson)
        handle.call("qc_participant_update_inbound") { h, err -> n.qc_participant_update_inbound(h, s, j, err) }
    }

    // ---- the registry --------------------------------------------------------

    /** Every live record, newest first (fields of `qwen sessions ps --json` plus `ref`, `reachable`, `recordPath`). */
    fun list(): List<Map<String, Any?>> =
        outArray("qc_participant_list_json") { h, out, err -> n.qc_participant_list_json(h, out, err) }

    /** The sessions a message can be sent to (excluding [fromSession]), each with its shortest `address`. */
    @JvmOverloads
    fun peers(fromSession: String? = null): List<Map<String, Any?>> {
        val f = optArg(fromSession, "qc_participant_peers_json", "fromSession")
        return outArray("qc_participant_peers_json") { h, out, err -> n.qc_participant_peers_json(h, f, out, err) }
    }

    /**
     * Resolves [address] (`name`, `name [ref]`, `[ref]` or a bare ref):
     * `NOT_FOUND` when nothing matches, `INVALID_ARGUMENT` when ambiguous.
     */
    @JvmOverloads
    fun resolve(address: String, fromSession: String? = null): Map<String, Any?> {
        val a = arg(address, "qc_participant_resolve_json", "address")
        val f = optArg(fromSession, "qc_participant_resolve_json", "fromSession")
        return outObject("qc_participant_resolve_json") { h, out, err -> n.qc_participant_resolve_json(h, a, f, out, err) }
    }

    // ---- sending -------------------------------------------------------------

    /**
     * Sends [content] to the session at [to]; returns `msgId`, `address`,
     * `toSessionId`, `confirmed`. Blocks until the recipient took the
     * connection (about 5 s at most). [fromMode] is asserted only when given;
     * [controller] presents the configured controller token; [fromSession]
     * picks which of our sessions sends. `NOT_FOUND` for an unknown address,
     * `INVALID_ARGUMENT` for an ambiguous one, `REFUSED` over the recipient's limits.
     */
    @JvmOverloads
    fun send(
        to: String,
        content: String,
        fromMode: ReviewClass? = null,
        priority: Priority? = null,
        controller: Boolean = false,
        fromSession: String? = null
    ): Map<String, Any?> {
        val m = LinkedHashMap<String, Any?>()
        m["to"] = to
        m["content"] = content
        if (fromSession != null) m["fromSession"] = fromSession
        if (priority != null) m["priority"] = priority.wire
        if (fromMode != null) m["fromMode"] = fromMode.wire
        if (controller) m["controller"] = true
        return sendJson(Json.write(m))
    }

    /** [send] with the raw options JSON of `qc_participant_send`. */
    fun sendJson(optionsJson: String): Map<String, Any?> {
        val j = CStrings.terminated(optionsJson)
        return outObject("qc_participant_send") { h, out, err -> n.qc_participant_send(h, j, out, err) }
    }

    /**
     * Sends [content] to the Qwen session that started this process, as
     * own-process ([toSessionId] picks one of that inbox's sessions).
     * `NOT_FOUND` when there is no parent session.
     */
    @JvmOverloads
    fun sendToParent(
        content: String,
        fromMode: ReviewClass? = null,
        priority: Priority? = null,
        fromSession: String? = null,
        toSessionId: String? = null
    ): Map<String, Any?> {
        val m = LinkedHashMap<String, Any?>()
        m["content"] = content
        if (fromSession != null) m["fromSession"] = fromSession
        if (priority != null) m["priority"] = priority.wire
        if (fromMode != null) m["fromMode"] = fromMode.wire
        if (toSessionId != null) m["toSessionId"] = toSessionId
        val j = CStrings.terminated(Json.write(m))
        return outObject("qc_participant_send_to_parent") { h, out, err -> n.qc_participant_send_to_parent(h, j, out, err) }
    }

    /**
     * The delivery state of a message we sent: `msgId`, `address`, `state`
     * (`pending`, `held`, `delivered`, `denied`, `refused`, `expired`,
     * `misaddressed`, `dropped`), `last`. `NOT_FOUND` for an id we never sent.
     */
    fun sendState(msgId: String): Map<String, Any?> {
        val id = arg(msgId, "qc_participant_send_state_json", "msgId")
        return outObject("qc_participant_send_state_json") { h, out, err -> n.qc_participant_send_state_json(h, id, out, err) }
    }

    /**
     * Waits up to [timeoutMs] for the message's next transition (with
     * [finalOnly], for a final state: not `pending` or `held`) and returns the
     * state reached, as [sendState]; a timeout is not an error.
     */
    @JvmOverloads
    fun wait(msgId: String, timeoutMs: Long = 10000, finalOnly: Boolean = true): Map<String, Any?> {
        if (timeoutMs < 0) {
            throw QwenCompanionException.Call("qc_participant_wait", QcStatus.INVALID_ARGUMENT.code, "timeoutMs must not be negative (got $timeoutMs)")
        }
        val id = arg(msgId, "qc_participant_wait", "msgId")
        // uint32_t milliseconds: clamp, then pass the low 32 bits.
        val ms = Math.min(timeoutMs, 0xFFFFFFFFL).toInt()
        return outObject("qc_participant_wait") { h, out, err -> n.qc_participant_wait(h, id, ms, if (finalOnly) 1 else 0, out, err) }
    }

    // ---- inbound messages awaiting the host ------------------------------------

    /**
     * Messages held for the host's review: `msgId`, `sessionId`, `content`,
     * `text`, `from`, `fromName`, `fromMode`, `origin`, `controllerLabel`,
     * `cause`, `heldAt`, `expiresAt`, `frame` (as in [onMessage]).
     */
    fun held(): List<Map<String, Any?>> =
        outArray("qc_participant_held_json") { h, out, err -> n.qc_participant_held_json(h, out, err) }

    /** Delivers a held message (`NOT_FOUND` when no longer held, `REFUSED` when the input queue is full). */
    fun release(msgId: String) {
        val id = arg(msgId, "qc_participant_release", "msgId")
        handle.call("qc_participant_release") { h, err -> n.qc_participant_release(h, id, err) }
    }

    /** Denies a held message (`NOT_FOUND` when no longer held). */
    fun deny(msgId: String) {
        val id = arg(msgId, "qc_participant_deny", "msgId")
        handle.call("qc_participant_deny") { h, err -> n.qc_participant_deny(h, id, err) }
    }

    /** With `manualAck`: the host consumed a delivered message (`NOT_FOUND` when not queued). */
    fun ack(msgId: String) {
        val id = arg(msgId, "qc_participant_ack", "msgId")
        handle.call("qc_participant_ack") { h, err -> n.qc_participant_ack(h, id, err) }
    }

    // ---- handlers ------------------------------------------------------------

    /**
     * Receives the library's log lines up to [maxLevel] on the `qc-cb` thread
     * (null removes the handler). It also receives the failures of the other
     * handlers. Exceptions from [handler] are swallowed.
     */
    @JvmOverloads
    fun setLogHandler(handler: ((LogLevel, String) -> Unit)?, maxLevel: LogLevel = LogLevel.INFO) =
        handle.setLogHandler("qc_participant_set_log_callback", handler, maxLevel, QcNative::qc_participant_set_log_callback)

    /**
     * Each delivered message (on the `qc-cb` thread): `msgId`, `sessionId`,
     * `content` (raw, untrusted), `text` (every `<` escaped), `envelope`,
     * `display`, `from`, `fromName`, `fromMode`, `priority`, `origin`
     * (`peer`, `own-process` or `controller`: what the connection proved),
     * `controllerLabel`, `frame` (as received, with the sender's
     * `replyToken`: keep it out of models and logs). Messages accepted while
     * no handler is set wait (up to 50 per session). Null removes the handler.
     */
    fun onMessage(handler: ((Map<String, Any?>) -> Unit)?) {
        val get = handle.hold("message", handler)
        val cb: QcNative.JsonFn? = if (handler == null) null else JsonAdapter("message", handle.reporter) { v -> get()?.invoke(asObject(v)) }
        handle.register("qc_participant_set_message_callback", cb, QcNative::qc_participant_set_message_callback)
    }

    /**
     * Every transition of a message we sent (on the `qc-cb` thread): `msgId`,
     * `address`, `status`, `previous`, `reason`, `dropReason`, `frame`.
     * Null removes the handler.
     */
    fun onReceipt(handler: ((Map<String, Any?>) -> Unit)?) {
        val get = handle.hold("receipt", handler)
        val cb: QcNative.JsonFn? = if (handler == null) null else JsonAdapter("receipt", handle.reporter) { v -> get()?.invoke(asObject(v)) }
        handle.register("qc_participant_set_receipt_callback", cb, QcNative::qc_participant_set_receipt_callback)
    }

    /** The whole hold buffer (as [held]) after each change, on the `qc-cb` thread. Null removes the handler. */
    fun onHeld(handler: ((List<Map<String, Any?>>) -> Unit)?) {
        val get = handle.hold("held", handler)
        val cb: QcNative.JsonFn? = if (handler == null) null else JsonAdapter("held", handle.reporter) { v -> get()?.invoke(asObjects(v)) }
        handle.register("qc_participant_set_held_callback", cb, QcNative::qc_participant_set_held_callback)
    }

    // ---- teardown --------------------------------------------------------------

    /**
     * Unregisters every session at once (records and socket removed, held and
     * queued messages `expired`, waiters woken) and frees the participant —
     * when the last call still running on another thread returns, if any.
     * Idempotent; safe from inside a handler.
     */
    override fun close() = handle.close { h -> n.qc_participant_close(h, null) }

    /** Runs [block] with the native handle borrowed (for [QwenHealth]). */
    internal fun <T> borrowRaw(block: (Pointer) -> T): T = handle.borrow(block)

    override fun toString(): String = handle.describeAs { "sessions=${sessions().map { it["name"] }}" }

    companion object {
        /** Creates a participant from a raw `config_json` (null = defaults). */
        @JvmStatic
        @JvmOverloads
        fun fromJson(configJson: String?, library: QwenCompanionLibrary = QwenCompanionLibrary.load()): QwenParticipant =
            QwenParticipant(configJson, library, Unit)

        @Suppress("UNCHECKED_CAST")
        internal fun asObject(v: Any?): Map<String, Any?> =
            v as? Map<String, Any?> ?: throw IllegalArgumentException("expected a JSON object from the library")

        internal fun asObjects(v: Any?): List<Map<String, Any?>> {
            val l = v as? List<*> ?: throw IllegalArgumentException("expected a JSON array from the library")
            return l.map { asObject(it) }
        }
    }

    private class JsonAdapter(
        val what: String,
        val reporter: NativeHandle.Reporter,
        val handler: (Any?) -> Unit
    ) : QcNative.JsonFn {
        override fun invoke(userData: Pointer?, json: Pointer?) {
            try {
                handler(Json.parse(CStrings.readZ(json) ?: "null"))
            } catch (t: Throwable) {
                reporter.failed(what, t)
            }
        }
    }
}
