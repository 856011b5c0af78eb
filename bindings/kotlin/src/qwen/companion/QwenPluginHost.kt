package qwen.companion

import com.sun.jna.Pointer
import com.sun.jna.ptr.IntByReference
import com.sun.jna.ptr.PointerByReference
import java.lang.ref.WeakReference

/**
 * Configuration of a plugin host (the `config_json` of `qc_plugin_host_new`);
 * null leaves a field at the library's default.
 */
data class QwenPluginHostConfig @JvmOverloads constructor(
    /** Default `$QWEN_HOME/companion/plugins`, else `~/.qwen/companion/plugins`. */
    val pluginsDir: String? = null,
    /** The node binary: a path or a name in PATH (default `node`). */
    val node: String? = null,
    /** [node] is an Electron runtime (run with `ELECTRON_RUN_AS_NODE=1`). */
    val nodeIsElectron: Boolean? = null,
    /** Default per-call timeout (30000; 50..3600000). */
    val callTimeoutMs: Long? = null,
    /** Largest message from a plugin (16 MiB); beyond it the call fails `too_large`. */
    val maxMessageBytes: Long? = null,
    /** Longest a plugin start may take (10000). */
    val startTimeoutMs: Long? = null,
    /** Grace after closing a plugin's channel, and after SIGTERM (2000). */
    val killGraceMs: Long? = null,
    /** Liveness probe after a timeout (1000). */
    val probeTimeoutMs: Long? = null,
    /** How long a capability request waits for the host's answer (30000). */
    val hostRequestTimeoutMs: Long? = null,
    /** `context.cwd` of calls that give none. */
    val workspaceRoot: String? = null,
    /** Unexpected exits that disable a plugin (3; 0 = never) ... */
    val crashLoopMaxExits: Int? = null,
    /** ... within this window (60000). */
    val crashLoopWindowMs: Long? = null,
    /** First delay before a crashed background plugin is started again, doubled per recent crash (1000; 0 = only the next call starts it). */
    val restartBackoffMs: Long? = null,
    /** How long a call polls for the plugin's reply before its thread sleeps, in µs (200; 0..10000; 0 = never). */
    val replyPollUs: Long? = null
) {
    /** The JSON object given to `qc_plugin_host_new`. */
    fun toJson(): String {
        val m = LinkedHashMap<String, Any?>()
        if (pluginsDir != null) m["pluginsDir"] = pluginsDir
        if (node != null) m["node"] = node
        if (nodeIsElectron != null) m["nodeIsElectron"] = nodeIsElectron
        if (callTimeoutMs != null) m["callTimeoutMs"] = callTimeoutMs
        if (maxMessageBytes != null) m["maxMessageBytes"] = maxMessageBytes
        if (startTimeoutMs != null) m["startTimeoutMs"] = startTimeoutMs
        if (killGraceMs != null) m["killGraceMs"] = killGraceMs
        if (probeTimeoutMs != null) m["probeTimeoutMs"] = probeTimeoutMs
        if (hostRequestTimeoutMs != null) m["hostRequestTimeoutMs"] = hostRequestTimeoutMs
        if (workspaceRoot != null) m["workspaceRoot"] = workspaceRoot
        if (crashLoopMaxExits != null) m["crashLoopMaxExits"] = crashLoopMaxExits
        if (crashLoopWindowMs != null) m["crashLoopWindowMs"] = crashLoopWindowMs
        if (restartBackoffMs != null) m["restartBackoffMs"] = restartBackoffMs
        if (replyPollUs != null) m["replyPollUs"] = replyPollUs
        return Json.write(m)
    }
}

/**
 * A failed plugin call (`call`, `visible`, `options`, `parseDocument`,
 * `unload`, a `callAsync` completion). [kind] is one of `schema`,
 * `unknown_tool`, `timeout`, `exited`, `protocol`, `too_large`,
 * `tool_error`, `disabled`, `not_found`, `host`; [details] the library's
 * whole error document; [status] the status of the kind (`INVALID_ARGUMENT`
 * for `schema`, `NOT_FOUND` for `unknown_tool`/`not_found`, `IO` for `host`,
 * `REFUSED` otherwise).
 */
class PluginCallException(
    function: String,
    code: Int,
    /** The library's error document (`kind`, `message`, and the kind's fields). */
    val details: Map<String, Any?>
) : QwenCompanionException.Call(function, code, "${details["kind"]}: ${details["message"]}") {
    val kind: String get() = details["kind"]?.toString() ?: "host"
    /** The library's sentence for the user. */
    val reason: String get() = details["message"]?.toString() ?: ""
    /** `tool_error`: the plugin's own message. */
    val pluginMessage: String? get() = details["pluginMessage"] as? String
    /** `exited`: the exit code, or null (killed by a signal). */
    val exitCode: Long? get() = (details["exitCode"] as? Number)?.toLong()
    /** `exited`: the signal, or null. */
    val signal: Long? get() = (details["signal"] as? Number)?.toLong()
    /** `exited`: the last lines of the plugin's stderr. */
    val stderrTail: String? get() = details["stderrTail"] as? String
    /** `schema`: `[{path, message}]`. */
    @Suppress("UNCHECKED_CAST")
    val schemaErrors: List<Map<String, Any?>> get() = (details["errors"] as? List<Map<String, Any?>>) ?: emptyList()
}

/**
 * A failed `install`, `uninstall` or `list`: [errorCode] (`invalid_manifest`,
 * `not_a_zip`, `not_found`, `invalid_id`, `io`, ...), [problems] (the
 * manifest's problems) and [details] (the whole error document).
 */
class PluginInstallException(
    function: String,
    code: Int,
    val details: Map<String, Any?>
) : QwenCompanionException.Call(function, code, "${details["code"]}: ${details["message"]}") {
    val errorCode: String get() = details["code"]?.toString() ?: "io"
    @Suppress("UNCHECKED_CAST")
    val problems: List<Map<String, Any?>> get() = (details["problems"] as? List<Map<String, Any?>>) ?: emptyList()
}

/**
 * Returned by a capability handler that answers later: call [resolve] or
 * [reject] once, from any thread (even before the handler returned). Both
 * return true when the plugin got the answer, false when the request no
 * longer waited (timed out, already answered, host closed).
 */
class Pending {
    private var target: Pair<QwenPluginHost, Long>? = null
    private var early: Pair<Any?, String?>? = null
    private var done = false

    fun resolve(result: Any?): Boolean = settle(result, null)

    fun reject(message: String): Boolean = settle(null, message)

    private fun settle(result: Any?, error: String?): Boolean {
        val t: Pair<QwenPluginHost, Long>
        synchronized(this) {
            if (done) return false
            done = true
            val bound = target
            if (bound == null) {
                early = Pair(result, error)
                return true
            }
            t = bound
        }
        return t.first.respondQuietly(t.second, result, error)
    }

    internal fun bind(host: QwenPluginHost, requestId: Long) {
        val answer: Pair<Any?, String?>?
        synchronized(this) {
            check(target == null) { "this Pending already answers another request" }
            target = Pair(host, requestId)
            answer = early
        }
        if (answer != null) host.respondQuietly(requestId, answer.first, answer.second)
    }
}

/**
 * The plugin host: runs the desktop app's plugins (a folder with
 * `manifest.json` and a Node entry script) installed in one plugins
 * directory, each in its own Node child from its first call; calls their
 * tools, forwards their `ui_push` messages as events and answers their
 * capability requests (`show_notification`, `render_pdf`, ...) with the
 * handlers given to [setCapability]. A plugin that crashes, hangs or floods
 * fails only its own calls.
 *
 * Results are the library's JSON documents as [Map]s and [List]s (see
 * [Json]). A failed call throws [PluginCallException]; a failed install,
 * uninstall or list throws [PluginInstallException]; both are
 * [QwenCompanionException.Call]s.
 *
 * Threading: every method may be called from any thread. Handlers (events,
 * capabilities, logs, [callAsync] completions) run on the host's own library
 * thread (`qc-cb`), one at a time, in order; a throwable escaping one is
 * contained and reported to the log handler. A blocking call ([call],
 * [visible], ...) made inside a handler holds that thread, so a capability
 * request of that very call waits until it times out: use [callAsync] there.
 *
 * Lifetime: [close] ends every plugin process (with its descendants),
 * answers waiting capability requests with an error and completes running
 * [callAsync] calls with kind `host`. Idempotent; a `Cleaner` frees a host
 * that is collected without [close].
 */
class QwenPluginHost private constructor(
    configJson: String?,
    /** The loaded native library. */
    val library: QwenCompanionLibrary,
    @Suppress("UNUSED_PARAMETER") marker: Unit
) : AutoCloseable {

    /**
     * Creates a plugin host (no plugin runs before its first call).
     * @throws QwenCompanionException.Call `INVALID_JSON` / `INVALID_ARGUMENT` for a bad config value.
     */
    @JvmOverloads
    constructor(
        config: QwenPluginHostConfig = QwenPluginHostConfig(),
        library: QwenCompanionLibrary = QwenCompanionLibrary.load()
    ) : this(config.toJson(), library, Unit)

    private val n: QcNative = library.native
    private val handle = NativeHandle(
        this, "QwenPluginHost", library, "qc_plugin_host_new", configJson,
        QcNative::qc_plugin_host_new, QcNative::qc_plugin_host_free
    )

    /** True after [close]. */
    val isClosed: Boolean get() = handle.isClosed

    private fun arg(s: String, function: String, what: String): ByteArray = CStrings.arg(s, function, what)

    /**
     * A call with `[char **out,] char **error_json, char **error` last:
     * returns `out` ("" when the function has none) or throws the error
     * built by [fail] from the error document.
     */
    private fun callEj(
        function: String,
        fail: (String, Int, Map<String, Any?>) -> QwenCompanionException.Call,
        f: (Pointer, PointerByReference, PointerByReference, PointerByReference) -> Int
    ): String = handle.borrow { h ->
        val out = PointerByReference()
        val ej = PointerByReference()
        val err = PointerByReference()
        val status = f(h, out, ej, err)
        val result = library.takeString(out.value)
        val errorJson = library.takeString(ej.value)
        val message = library.takeString(err.value)
        if (status != 0) {
            val doc = if (errorJson == null) null else try {
                Json.parse(errorJson) as? Map<*, *>
            } catch (e: IllegalArgumentException) {
                null
            }
            if (doc != null) {
                @Suppress("UNCHECKED_CAST")
                throw fail(function, status, doc as Map<String, Any?>)
            }
            throw QwenCompanionException.Call(function, status, message ?: library.statusName(status))
        }
        result ?: ""
    }

    private fun callFailed(function: String, code: Int, doc: Map<String, Any?>): QwenCompanionException.Call =
        PluginCallException(function, code, doc)

    private fun installFailed(function: String, code: Int, doc: Map<String, Any?>): QwenCompanionException.Call =
        PluginInstallException(function, code, doc)

    private fun json(value: Any?, function: String, what: String): ByteArray = try {
        CStrings.terminated(Json.write(value))
    } catch (e: IllegalArgumentException) {
        throw QwenCompanionException.Call(function, QcStatus.INVALID_ARGUMENT.code, "$what is not JSON: ${e.message}")
    }

    private fun callOptions(cwd: String?, timeoutMs: Long?): ByteArray? {
        if (cwd == null && timeoutMs == null) return null
        val m = LinkedHashMap<String, Any?>()
        if (cwd != null) m["cwd"] = cwd
        if (timeoutMs != null) m["timeoutMs"] = timeoutMs
        return CStrings.terminated(Json.write(m))
    }

    // ---- the plugins directory ---------------------------------------------------

    /** The plugins directory in use (absolute). */
    val pluginsDir: String
        get() = handle.outString("qc_plugin_host_plugins_dir") { h, out, err -> n.qc_plugin_host_plugins_dir(h, out, err) }

    /**
     * Installs the plugin folder or `.zip` at [src] (validated before anything
     * is replaced; an installed version is replaced, its data kept). Returns
     * its summary: `id`, `name`, `version`, `tools`, `replaced`,
     * `previousVersion`, `warnings`...
     */
    fun install(src: String): Map<String, Any?> {
        val s = arg(src, "qc_plugin_host_install", "src")
        return Json.parseObject(callEj("qc_plugin_host_install", ::installFailed) { h, out, ej, err -> n.qc_plugin_host_install(h, s, out, ej, err) })
    }

    /** Ends and removes plugin [id]; with [removeData] also its data folder and state. Returns `{id, dataRemoved}`. */
    @JvmOverloads
    fun uninstall(id: String, removeData: Boolean = false): Map<String, Any?> {
        val i = arg(id, "qc_plugin_host_uninstall", "id")
        return Json.parseObject(callEj("qc_plugin_host_uninstall", ::installFailed) { h, out, ej, err ->
            n.qc_plugin_host_uninstall(h, i, if (removeData) 1 else 0, out, ej, err)
        })
    }

    /** Every installed plugin, sorted by id (`id`, `name`, `version`, `enabled`, `tools`...; a broken one has `error`). */
    fun list(): List<Map<String, Any?>> =
        QwenParticipant.asObjects(Json.parse(callEj("qc_plugin_host_list", ::installFailed) { h, out, ej, err -> n.qc_plugin_host_list(h, out, ej, err) }))

    /** Re-reads the plugins directory (after changes made behind the host's back). */
    fun reload() = handle.call("qc_plugin_host_reload") { h, err -> n.qc_plugin_host_reload(h, err) }

    /** Counters of plugin [id] (`starts`, `running`, ...), for debugging. */
    fun stats(id: String): Map<String, Any?> {
        val i = arg(id, "qc_plugin_host_stats", "id")
        return Json.parseObject(handle.outString("qc_plugin_host_stats") { h, out, err -> n.qc_plugin_host_stats(h, i, out, err) })
    }

    // ---- lifecycle ----------------------------------------------------------------

    /** Starts every enabled `onStartupFinished` plugin; one `{plugin, ok, error?}` per plugin. */
    fun startupFinished(): List<Map<String, Any?>> = QwenParticipant.asObjects(
        Json.parse(handle.outString("qc_plugin_host_startup_finished") { h, out, err -> n.qc_plugin_host_startup_finished(h, out, err) })
    )

    /** Ends plugin [id]'s process; its next call starts it again. */
    fun unload(id: String) {
        val i = arg(id, "qc_plugin_host_unload", "id")
        callEj("qc_plugin_host_unload", ::callFailed) { h, _, ej, err -> n.qc_plugin_host_unload(h, i, ej, err) }
    }

    /** Enables plugin [id] (persisted) and clears its crash-loop breaker. */
    fun enable(id: String) {
        val i = arg(id, "qc_plugin_host_enable", "id")
        handle.call("qc_plugin_host_enable") { h, err -> n.qc_plugin_host_enable(h, i, err) }
    }

    /** Disables plugin [id] (persisted) and ends it; its calls then fail `disabled`. */
    fun disable(id: String) {
        val i = arg(id, "qc_plugin_host_disable", "id")
        handle.call("qc_plugin_host_disable") { h, err -> n.qc_plugin_host_disable(h, i, err) }
    }

    /** Sets configuration value [key] of plugin [id] (null restores the default). */
    fun setConfigValue(id: String, key: String, value: Any?) {
        val i = arg(id, "qc_plugin_host_set_config_value", "id")
        val k = arg(key, "qc_plugin_host_set_config_value", "key")
        val v = json(value, "qc_plugin_host_set_config_value", "value")
        handle.call("qc_plugin_host_set_config_value") { h, err -> n.qc_plugin_host_set_config_value(h, i, k, v, err) }
    }

    // ---- calls ----------------------------------------------------------------------

    /**
     * Calls [tool] of [pluginId] with [params] (checked against the tool's
     * schema first) and waits: `{content: [...], details?: ...}`. [cwd] is the
     * call's `context.cwd`; [timeoutMs] overrides `callTimeoutMs`.
     * @throws PluginCallException for a failed call.
     */
    @JvmOverloads
    fun call(pluginId: String, tool: String, params: Map<String, Any?> = emptyMap(), cwd: String? = null, timeoutMs: Long? = null): Map<String, Any?> {
        val fn = "qc_plugin_host_call"
        val p = arg(pluginId, fn, "pluginId")
        val t = arg(tool, fn, "tool")
        val j = json(params, fn, "params")
        val o = callOptions(cwd, timeoutMs)
        return Json.parseObject(callEj(fn, ::callFailed) { h, out, ej, err -> n.qc_plugin_host_call(h, p, t, j, o, out, ej, err) })
    }

    /**
     * Starts a call and returns at once; [callback] runs exactly once on the
     * library thread with `(result, null)` or `(null, PluginCallException)`.
     * Argument errors throw here, and then [callback] never runs.
     */
    @JvmOverloads
    fun callAsync(
        pluginId: String,
        tool: String,
        params: Map<String, Any?> = emptyMap(),
        cwd: String? = null,
        timeoutMs: Long? = null,
        callback: (Map<String, Any?>?, PluginCallException?) -> Unit
    ) {
        val fn = "qc_plugin_host_call_async"
        val p = arg(pluginId, fn, "pluginId")
        val t = arg(tool, fn, "tool")
        val j = json(params, fn, "params")
        val o = callOptions(cwd, timeoutMs)
        val cb = DoneAdapter(handle.reporter, callback)
        val token = handle.retainOneShot(cb)
        try {
            handle.call(fn) { h, err -> n.qc_plugin_host_call_async(h, p, t, j, o, cb, token, CallbackRegistry.FREE, err) }
        } catch (e: Throwable) {
            CallbackRegistry.release(token)
            throw e
        }
    }

    /** Whether the plugin's session action shows for session folder [cwd] (its `visibleTool`). */
    fun visible(pluginId: String, cwd: String): Boolean {
        val fn = "qc_plugin_host_visible"
        val p = arg(pluginId, fn, "pluginId")
        val c = arg(cwd, fn, "cwd")
        val out = IntByReference()
        callEj(fn, ::callFailed) { h, _, ej, err -> n.qc_plugin_host_visible(h, p, c, out, ej, err) }
        return out.value != 0
    }

    /** The options of `select` entry [configId]: `Auto` first, then what its `optionsTool` returned. */
    fun options(pluginId: String, configId: String): List<Map<String, Any?>> {
        val fn = "qc_plugin_host_options"
        val p = arg(pluginId, fn, "pluginId")
        val c = arg(configId, fn, "configId")
        return QwenParticipant.asObjects(Json.parse(callEj(fn, ::callFailed) { h, out, ej, err -> n.qc_plugin_host_options(h, p, c, out, ej, err) }))
    }

    /** Parses a dropped file with the plugin whose `documentParsers` lists [mime]: `{success, text}` or `{success: false, reason}`. */
    fun parseDocument(mime: String, data: ByteArray): Map<String, Any?> {
        val fn = "qc_plugin_host_parse_document"
        val m = arg(mime, fn, "mime")
        // A zero-length Java array may reach C as NULL; the library takes NULL with length 0 as an empty file.
        return Json.parseObject(callEj(fn, ::callFailed) { h, out, ej, err ->
            n.qc_plugin_host_parse_document(h, m, if (data.isEmpty()) null else data, data.size.toLong(), out, ej, err)
        })
    }

    // ---- events, logs, capabilities ---------------------------------------------------

    /**
     * Each event (on the `qc-cb` thread): `plugin_started` (`plugin`, `pid`),
     * `plugin_exit` (`code`, `signal`, `expected`, `stderrTail`),
     * `plugin_disabled` (`reason`), `ui_push` (`plugin`, `channel`,
     * `payload`), with a `type`. Null removes the handler.
     */
    fun onEvent(handler: ((Map<String, Any?>) -> Unit)?) {
        val get = handle.hold("event", handler)
        val cb: QcNative.JsonFn? = if (handler == null) null else EventAdapter(handle.reporter, get)
        handle.register("qc_plugin_host_set_event_callback", cb, QcNative::qc_plugin_host_set_event_callback)
    }

    /** The library's log lines up to [maxLevel] (and handler failures), on the `qc-cb` thread; null removes it. */
    @JvmOverloads
    fun setLogHandler(handler: ((LogLevel, String) -> Unit)?, maxLevel: LogLevel = LogLevel.INFO) =
        handle.setLogHandler("qc_plugin_host_set_log_callback", handler, maxLevel, QcNative::qc_plugin_host_set_log_callback)

    /**
     * Offers capability [name] answered by [handler] (on the `qc-cb` thread)
     * with the request `{id, plugin, capability, params}`: the value it
     * returns (JSON-able) is the plugin's result, a throwable makes the
     * plugin's `host_error`; a returned [Pending] answers later. Null removes
     * the handler: the library default applies again (`render_pdf` renders
     * the PDF itself, `show_notification` answers `{shown: false}`).
     */
    fun setCapability(name: String, handler: ((Map<String, Any?>) -> Any?)?) {
        val fn = "qc_plugin_host_set_capability_callback"
        val nm = arg(name, fn, "name")
        val get = handle.hold("capability\u0000$name", handler)
        val cb: QcNative.CapabilityFn? = if (handler == null) null else CapabilityAdapter(name, handle.reporter, WeakReference(this), get)
        handle.registerKeyed(fn, name, cb) { h, c, token, fin, err -> n.qc_plugin_host_set_capability_callback(h, nm, c, token, fin, err) }
    }

    /**
     * Answers capability request [requestId] (a handler's `request["id"]` or a
     * pulled `host_request` event): with [error] the plugin gets `host_error`,
     * else [result]. `NOT_FOUND` when the request no longer waits.
     */
    @JvmOverloads
    fun respond(requestId: Long, result: Any?, error: String? = null) {
        val fn = "qc_plugin_host_respond"
        val r = if (error != null) null else json(result, fn, "result")
        val e = if (error == null) null else CStrings.terminated(error.replace('\u0000', ' '))
        handle.call(fn) { h, err -> n.qc_plugin_host_respond(h, requestId, r, e, err) }
    }

    /** [respond] for [Pending] and handlers: false instead of throwing when the request or host is gone. */
    internal fun respondQuietly(requestId: Long, result: Any?, error: String?): Boolean = try {
        try {
            respond(requestId, result, error)
        } catch (e: QwenCompanionException.Call) {
            if (e.status != QcStatus.INVALID_ARGUMENT) throw e
            respond(requestId, null, e.detail) // a result that is not JSON: the plugin gets an error
        }
        true
    } catch (e: QwenCompanionException) {
        false
    }

    // ---- the plugin MCP server -------------------------------------------------------

    /**
     * Starts the host's plugin MCP server (`qwen-companion-plugins`: every
     * enabled plugin's tools as MCP tools on `127.0.0.1`, bearer token) and
     * writes the lock file `qc-mcp-bridge` reads; returns [mcpInfo].
     * [config] keys, all optional: `workspacePaths` (absolute folders; default
     * the host's `workspaceRoot`), `lockDir`, `maxBodyBytes`, `keepAliveMs`,
     * `http`, `sessionGraceMs`, `maxSessions`. `ALREADY_RUNNING` when it runs.
     * The server stops with [mcpStop] or [close].
     */
    @JvmOverloads
    fun mcpStart(config: Map<String, Any?>? = null): Map<String, Any?> {
        val c = if (config == null) null else json(config, "qc_plugin_host_mcp_start", "config")
        handle.call("qc_plugin_host_mcp_start") { h, err -> n.qc_plugin_host_mcp_start(h, c, err) }
        return mcpInfo()
    }

    /** Stops the plugin MCP server (lock file removed, bridges end); `NOT_RUNNING` when it does not run. */
    fun mcpStop() = handle.call("qc_plugin_host_mcp_stop") { h, err -> n.qc_plugin_host_mcp_stop(h, err) }

    /**
     * `{url, port, headers: {Authorization: "Bearer ..."}, env: {}, lockFile,
     * serverName, tools: [names], sessions}` of the running server. `env` is
     * empty: Qwen Code reaches the server through the bridge, so terminals
     * need no variable. `NOT_RUNNING` when it does not run.
     */
    fun mcpInfo(): Map<String, Any?> =
        Json.parseObject(handle.outString("qc_plugin_host_mcp_info") { h, out, err -> n.qc_plugin_host_mcp_info(h, out, err) })

    // ---- the view server (plugin pages with window.pluginHost) ------------------------

    /**
     * Starts the host's view server on `127.0.0.1` (the pages of the enabled
     * plugins, `window.pluginHost` injected) and returns [views].
     * [configJson] (a JSON object, keys all optional): `colorScheme`
     * (`"light"`/`"dark"`; default the last [setColorScheme]),
     * `maxBodyBytes`, `keepAliveMs`, `http`. `ALREADY_RUNNING` when it runs.
     * The server stops with [viewsStop] or [close].
     */
    @JvmOverloads
    fun viewsStart(configJson: String? = null): Map<String, Any?> {
        val c = configJson?.let { arg(it, "qc_plugin_host_views_start", "configJson") }
        return Json.parseObject(
            handle.outString("qc_plugin_host_views_start") { h, out, err -> n.qc_plugin_host_views_start(h, c, out, err) }
        )
    }

    /** Stops the view server (open pages stop working); `NOT_RUNNING` when it does not run. */
    fun viewsStop() = handle.call("qc_plugin_host_views_stop") { h, err -> n.qc_plugin_host_views_stop(h, err) }

    /**
     * `{url, views: [{plugin, id, title, icon, width, url}], panels: [{plugin,
     * title, url}], colorScheme}` for every enabled plugin; each page URL
     * carries its own capability (open it in JCEF or any browser).
     * `NOT_RUNNING` when the server does not run.
     */
    fun views(): Map<String, Any?> =
        Json.parseObject(handle.outString("qc_plugin_host_views_json") { h, out, err -> n.qc_plugin_host_views_json(h, out, err) })

    /**
     * The URL of view [viewId] of [pluginId] (null: the plugin's `ui` panel).
     * `NOT_FOUND` for an unknown or disabled plugin or page, `NOT_RUNNING`
     * when the server does not run.
     */
    @JvmOverloads
    fun viewUrl(pluginId: String, viewId: String? = null): String {
        val p = arg(pluginId, "qc_plugin_host_view_url", "pluginId")
        val v = viewId?.let { arg(it, "qc_plugin_host_view_url", "viewId") }
        return handle.outString("qc_plugin_host_view_url") { h, out, err -> n.qc_plugin_host_view_url(h, p, v, out, err) }
    }

    /**
     * Sets the colour scheme pages see (`"light"` or `"dark"`, else
     * `INVALID_ARGUMENT`); open pages' `onColorSchemeChange` callbacks get it.
     * Allowed before [viewsStart].
     */
    fun setColorScheme(scheme: String) {
        val s = arg(scheme, "qc_plugin_host_set_color_scheme", "scheme")
        handle.call("qc_plugin_host_set_color_scheme") { h, err -> n.qc_plugin_host_set_color_scheme(h, s, err) }
    }

    // ---- pull mode ---------------------------------------------------------------------

    /**
     * Switches to pull mode and returns the event handle (owned by the
     * library): on Linux and macOS a file descriptor readable while events
     * wait, on Windows an event `HANDLE` carried in the `int32_t` (see
     * [QcPlatform.handleFromInt32]). Then no event or capability handler runs:
     * wait with [waitEvent] (or your own loop) and take events with [nextEvent].
     */
    fun enableEvents(): Int {
        val fd = IntByReference()
        handle.call("qc_plugin_host_enable_events") { h, err -> n.qc_plugin_host_enable_events(h, fd, err) }
        eventHandle = fd.value
        return fd.value
    }

    @Volatile
    private var eventHandle: Int? = null

    /**
     * Waits at most [timeoutMs] (negative: no limit) until events wait in pull
     * mode: `poll` on the descriptor on Linux and macOS, `WaitForSingleObject`
     * on the event handle on Windows. Returns true when events wait.
     * @throws QwenCompanionException.Call (`QC_REFUSED`) before [enableEvents].
     */
    fun waitEvent(timeoutMs: Int): Boolean {
        val h = eventHandle ?: throw QwenCompanionException.Call("waitEvent", QcStatus.REFUSED.code, "waitEvent needs pull mode: call enableEvents first")
        return QcPlatform.waitEventHandle(h, timeoutMs)
    }

    /** The next queued event (pull mode) or null; capability requests come as `host_request` events. */
    fun nextEvent(): Map<String, Any?>? {
        val s = handle.outString("qc_plugin_host_next_event") { h, out, err -> n.qc_plugin_host_next_event(h, out, err) }
        return if (s.isEmpty()) null else Json.parseObject(s)
    }

    /** Offers capability [name] to plugins in pull mode (its requests are queued as events). */
    fun offerCapability(name: String) {
        val nm = arg(name, "qc_plugin_host_offer_capability", "name")
        handle.call("qc_plugin_host_offer_capability") { h, err -> n.qc_plugin_host_offer_capability(h, nm, err) }
    }

    // ---- teardown ------------------------------------------------------------------------

    /** Frees the host (see the class docs); idempotent, allowed inside a handler. */
    override fun close() = handle.close()

    /** Runs [block] with the native handle borrowed (for [QwenHealth]). */
    internal fun <T> borrowRaw(block: (Pointer) -> T): T = handle.borrow(block)

    override fun toString(): String = handle.describeAs { "pluginsDir=$pluginsDir" }

    companion object {
        /** Creates a plugin host from a raw `config_json` (null = defaults). */
        @JvmStatic
        @JvmOverloads
        fun fromJson(configJson: String?, library: QwenCompanionLibrary = QwenCompanionLibrary.load()): QwenPluginHost =
            QwenPluginHost(configJson, library, Unit)

        /**
         * Adds (or replaces) the `qwen-companion-plugins` entry of Qwen Code's
         * `mcpServers` in one settings file: [scope] `user`
         * (`$QWEN_HOME/settings.json`) or `project` (`<project>/.qwen/settings.json`,
         * [project] an absolute folder). The entry starts [bridge] (the absolute
         * path of `qc-mcp-bridge`); [alwaysLoadTools] declares every tool up front.
         * Every other key and comment stays. Returns `{ok, scope, settings,
         * change, created, replacedSymlink, serversLeft, approve?}` (`approve`:
         * the command the user runs once for the project scope). A settings file
         * Qwen Code could not read fails `INVALID_JSON` and is left untouched.
         */
        @JvmStatic
        @JvmOverloads
        fun registerMcp(
            scope: String,
            project: String? = null,
            bridge: String? = null,
            alwaysLoadTools: Boolean = false,
            library: QwenCompanionLibrary = QwenCompanionLibrary.load()
        ): Map<String, Any?> = settingsCall("qc_mcp_register", mcpOptions(scope, project, bridge, alwaysLoadTools), library) { o, out, err ->
            library.native.qc_mcp_register(o, out, err)
        }

        /**
         * Removes the `qwen-companion-plugins` entry (`change` is `removed`, or
         * `absent` when there was none); arguments as for [registerMcp].
         */
        @JvmStatic
        @JvmOverloads
        fun unregisterMcp(
            scope: String,
            project: String? = null,
            bridge: String? = null,
            alwaysLoadTools: Boolean = false,
            library: QwenCompanionLibrary = QwenCompanionLibrary.load()
        ): Map<String, Any?> = settingsCall("qc_mcp_unregister", mcpOptions(scope, project, bridge, alwaysLoadTools), library) { o, out, err ->
            library.native.qc_mcp_unregister(o, out, err)
        }

        private fun mcpOptions(scope: String, project: String?, bridge: String?, alwaysLoadTools: Boolean): Map<String, Any?> {
            val m = LinkedHashMap<String, Any?>()
            m["scope"] = scope
            if (project != null) m["project"] = project
            if (bridge != null) m["bridge"] = bridge
            m["alwaysLoadTools"] = alwaysLoadTools
            return m
        }

        private fun settingsCall(
            function: String,
            options: Map<String, Any?>,
            library: QwenCompanionLibrary,
            f: (ByteArray, PointerByReference, PointerByReference) -> Int
        ): Map<String, Any?> {
            val o = CStrings.terminated(Json.write(options))
            val out = PointerByReference()
            val err = PointerByReference()
            val status = f(o, out, err)
            val result = library.takeString(out.value)
            val message = library.takeString(err.value)
            if (status != 0) throw QwenCompanionException.Call(function, status, message ?: library.statusName(status))
            return Json.parseObject(result ?: "{}")
        }

        internal fun statusOfKind(kind: String?): Int = when (kind) {
            "schema" -> QcStatus.INVALID_ARGUMENT.code
            "unknown_tool", "not_found" -> QcStatus.NOT_FOUND.code
            "host" -> QcStatus.IO.code
            else -> QcStatus.REFUSED.code
        }
    }

    private class EventAdapter(
        val reporter: NativeHandle.Reporter,
        /** Weak (see [NativeHandle.hold]). */
        val handler: () -> ((Map<String, Any?>) -> Unit)?
    ) : QcNative.JsonFn {
        override fun invoke(userData: Pointer?, json: Pointer?) {
            try {
                val h = handler() ?: return
                h(QwenParticipant.asObject(Json.parse(CStrings.readZ(json) ?: "null")))
            } catch (t: Throwable) {
                reporter.failed("event", t)
            }
        }
    }

    private class DoneAdapter(
        val reporter: NativeHandle.Reporter,
        val callback: (Map<String, Any?>?, PluginCallException?) -> Unit
    ) : QcNative.JsonFn {
        override fun invoke(userData: Pointer?, json: Pointer?) {
            try {
                val doc = QwenParticipant.asObject(Json.parse(CStrings.readZ(json) ?: "null"))
                if (doc["ok"] == true) {
                    callback(QwenParticipant.asObject(doc["result"]), null)
                } else {
                    val e = QwenParticipant.asObject(doc["error"])
                    callback(null, PluginCallException("qc_plugin_host_call_async", statusOfKind(e["kind"] as? String), e))
                }
            } catch (t: Throwable) {
                reporter.failed("callAsync", t)
            }
        }
    }

    private class CapabilityAdapter(
        val name: String,
        val reporter: NativeHandle.Reporter,
        /** Weak: a pinned adapter must not keep the host reachable. */
        val host: WeakReference<QwenPluginHost>,
        /** Weak (see [NativeHandle.hold]). */
        val handler: () -> ((Map<String, Any?>) -> Any?)?
    ) : QcNative.CapabilityFn {
        override fun invoke(userData: Pointer?, requestId: Long, requestJson: Pointer?) {
            try {
                val request = QwenParticipant.asObject(Json.parse(CStrings.readZ(requestJson) ?: "null"))
                val answer = try {
                    val h = handler() ?: throw IllegalStateException(NativeHandle.GONE)
                    h(request)
                } catch (t: Throwable) {
                    reporter.failed("$name capability", t)
                    host.get()?.respondQuietly(requestId, null, "the $name capability handler failed: ${NativeHandle.describe(t)}")
                    return
                }
                val h = host.get() ?: return
                if (answer is Pending) answer.bind(h, requestId) else h.respondQuietly(requestId, answer, null)
            } catch (t: Throwable) {
                reporter.failed("$name capability", t)
            }
        }
    }
}
