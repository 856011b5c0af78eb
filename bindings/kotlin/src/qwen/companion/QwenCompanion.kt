package qwen.companion

import com.sun.jna.CallbackThreadInitializer
import com.sun.jna.Native
import com.sun.jna.Pointer
import com.sun.jna.ptr.PointerByReference
import com.sun.jna.ptr.ShortByReference
import java.lang.ref.Cleaner

/** Log levels of the library (`QC_LOG_*`). */
enum class LogLevel(val code: Int) {
    ERROR(1), WARN(2), INFO(3), DEBUG(4), TRACE(5);

    companion object {
        /** The level for a `QC_LOG_*` value (unknown values count as [TRACE]). */
        @JvmStatic
        fun fromCode(code: Int): LogLevel {
            for (l in values()) if (l.code == code) return l
            return TRACE
        }
    }
}

/** What an open-diff handler answers. */
sealed class OpenDiffResult {
    /** The diff view is shown; the CLI gets `content: []`. */
    object Shown : OpenDiffResult()

    /** The diff was not shown; the CLI gets `isError` with [message] (or the library's default text). */
    class Refused(val message: String?) : OpenDiffResult()

    companion object {
        @JvmStatic
        fun shown(): OpenDiffResult = Shown

        @JvmStatic
        fun refused(message: String?): OpenDiffResult = Refused(message)

        /** `true` → [Shown], `false` → [Refused] with [message]. */
        @JvmStatic
        @JvmOverloads
        fun of(shown: Boolean, message: String? = null): OpenDiffResult = if (shown) Shown else Refused(message)
    }
}

/**
 * Configuration of a companion (the `config_json` of `qc_companion_new`).
 * `null` leaves a field at the library's default.
 */
data class QwenCompanionConfig @JvmOverloads constructor(
    /** Absolute workspace root folders (`workspacePath` of the lock file). */
    val workspaceRoots: List<String> = emptyList(),
    /** Human-readable IDE name (`ideName`). */
    val ideName: String? = null,
    /** `ideInfo.displayName` (defaults to [ideName]). */
    val ideDisplayName: String? = null,
    /** `ideInfo.name` (defaults to a slug of [ideName]). */
    val ideId: String? = null,
    /** Lock file directory (default `$QWEN_HOME/ide`, else `~/.qwen/ide`). */
    val lockDir: String? = null,
    /** `ppid` written to the lock file (default: this JVM's pid, which lives as long as the IDE). */
    val ppid: Long? = null,
    /** Initial workspace trust (library default `true`). */
    val trusted: Boolean? = null,
    /** Trailing debounce of context updates (library default 50 ms). */
    val debounceMs: Long? = null,
    /** Longest a context update may be held back (library default 200 ms). */
    val maxWaitMs: Long? = null,
    /** Largest accepted request body (library default 64 MiB). */
    val maxBodyBytes: Long? = null,
    /** SSE keep-alive interval on every stream (library default 15000 ms, at most 30000). */
    val keepAliveMs: Long? = null
) {
    /** The JSON object given to `qc_companion_new`. */
    fun toJson(): String {
        val m = LinkedHashMap<String, Any?>()
        m["workspaceRoots"] = workspaceRoots
        if (ideName != null) m["ideName"] = ideName
        if (ideDisplayName != null) m["ideDisplayName"] = ideDisplayName
        if (ideId != null) m["ideId"] = ideId
        if (lockDir != null) m["lockDir"] = lockDir
        if (ppid != null) m["ppid"] = ppid
        if (trusted != null) m["trusted"] = trusted
        if (debounceMs != null) m["debounceMs"] = debounceMs
        if (maxWaitMs != null) m["maxWaitMs"] = maxWaitMs
        if (maxBodyBytes != null) m["maxBodyBytes"] = maxBodyBytes
        if (keepAliveMs != null) m["keepAliveMs"] = keepAliveMs
        return Json.write(m)
    }
}

/**
 * A Qwen Code IDE companion: an MCP server on 127.0.0.1 plus its lock file,
 * fed with the editor's context and asked to show diffs.
 *
 * Threading: every method may be called from any thread, including from
 * inside the handlers. Handlers run on the companion's own library thread
 * (named `qc-cb`), one at a time; they must not block for long (the CLI's
 * request is answered only when `onOpenDiff`/`onCloseDiff` return; the library
 * gives up after 30 s). A handler that throws is answered as a failure with
 * the exception's text; nothing ever unwinds into native code.
 *
 * Lifetime: [close] frees the native object (stopping the server and
 * removing the lock file). It is idempotent and never frees the handle under
 * a call running on another thread: the last such call frees it instead. An
 * object that is garbage-collected without [close] is freed by a `Cleaner`,
 * so keep a reference for as long as the companion should serve.
 */
class QwenCompanion private constructor(
    configJson: String?,
    /** The loaded native library. */
    val library: QwenCompanionLibrary,
    @Suppress("UNUSED_PARAMETER") marker: Unit
) : AutoCloseable {

    /**
     * Creates a companion (not yet listening).
     * @throws QwenCompanionException.Load if the library cannot be loaded,
     * @throws QwenCompanionException.Call e.g. `INVALID_ARGUMENT` for a relative workspace root.
     */
    @JvmOverloads
    constructor(
        config: QwenCompanionConfig = QwenCompanionConfig(),
        library: QwenCompanionLibrary = QwenCompanionLibrary.load()
    ) : this(config.toJson(), library, Unit)

    private val n: QcNative = library.native
    private val callbacks = Callbacks()
    private val guard: HandleGuard
    private val cleanable: Cleaner.Cleanable

    init {
        val out = PointerByReference()
        val err = PointerByReference()
        val status = n.qc_companion_new(if (configJson == null) null else CStrings.terminated(configJson), out, err)
        library.check("qc_companion_new", status, err)
        val handle = out.value ?: throw QwenCompanionException.Call("qc_companion_new", QcStatus.INTERNAL.code, "no handle returned")
        val lib = library
        val held = callbacks
        guard = HandleGuard("QwenCompanion", handle) { h ->
            lib.native.qc_companion_free(h)
            // The library has dropped every user_data by now (finalizers ran);
            // the callbacks may go.
            held.clear()
        }
        cleanable = CLEANER.register(this, guard)
    }

    /** The callbacks currently registered, held for the handle's life. */
    private class Callbacks {
        @Volatile var log: QcNative.LogFn? = null
        @Volatile var openDiff: QcNative.OpenDiffFn? = null
        @Volatile var closeDiff: QcNative.CloseDiffFn? = null

        fun clear() {
            log = null
            openDiff = null
            closeDiff = null
        }
    }

    /** True after [close]. */
    val isClosed: Boolean get() = guard.isClosed

    private fun <T> call(function: String, block: (Pointer, PointerByReference) -> Int, result: () -> T): T =
        guard.use { h ->
            val err = PointerByReference()
            library.check(function, block(h, err), err)
            result()
        }

    private fun call(function: String, block: (Pointer, PointerByReference) -> Int) {
        call(function, block) { Unit }
    }

    private fun outString(function: String, f: (Pointer, PointerByReference, PointerByReference) -> Int): String {
        val out = PointerByReference()
        return call(function, { h, err -> f(h, out, err) }) {
            library.takeString(out.value) ?: ""
        }
    }

    // ---- lifecycle -------------------------------------------------------

    /** Binds 127.0.0.1 on a free port and writes the lock file (`ALREADY_RUNNING` if running). */
    fun start() = call("qc_companion_start") { h, err -> n.qc_companion_start(h, err) }

    /** Closes every client session and removes the lock file (`NOT_RUNNING` if not running). */
    fun stop() = call("qc_companion_stop") { h, err -> n.qc_companion_stop(h, err) }

    /** The listening port (`NOT_RUNNING` when stopped). */
    fun port(): Int {
        val out = ShortByReference()
        return call("qc_companion_port", { h, err -> n.qc_companion_port(h, out, err) }) {
            out.value.toInt() and 0xFFFF
        }
    }

    /** The port, or `null` when not running. */
    fun portOrNull(): Int? = try {
        port()
    } catch (e: QwenCompanionException.Call) {
        if (e.status == QcStatus.NOT_RUNNING) null else throw e
    }

    /** True while serving. */
    val isRunning: Boolean get() = !isClosed && portOrNull() != null

    /** Path of the lock file `<lockDir>/<port>.lock` (`NOT_RUNNING` when stopped). */
    fun lockFilePath(): String =
        outString("qc_companion_lock_file_path") { h, out, err -> n.qc_companion_lock_file_path(h, out, err) }

    /** The terminal environment as the library's JSON object text. */
    fun terminalEnvJson(): String =
        outString("qc_companion_terminal_env_json") { h, out, err -> n.qc_companion_terminal_env_json(h, out, err) }

    /**
     * Variables to set in the IDE's integrated terminals
     * (`QWEN_CODE_IDE_SERVER_PORT`, `QWEN_CODE_IDE_WORKSPACE_PATH`);
     * `NOT_RUNNING` when stopped.
     */
    fun terminalEnv(): Map<String, String> {
        val m = LinkedHashMap<String, String>()
        for ((k, v) in Json.parseObject(terminalEnvJson())) m[k] = v?.toString() ?: ""
        return m
    }

    /** Replaces the workspace roots (absolute paths); rewrites the lock file when running. */
    fun setWorkspaceRoots(roots: List<String>) {
        val json = CStrings.terminated(Json.write(roots))
        call("qc_companion_set_workspace_roots_json") { h, err -> n.qc_companion_set_workspace_roots_json(h, json, err) }
    }

    // ---- editor context --------------------------------------------------

    /** The editor opened [path] (not necessarily focused). */
    fun fileOpened(path: String) {
        val p = CStrings.arg(path, "qc_companion_file_opened", "path")
        call("qc_companion_file_opened") { h, err -> n.qc_companion_file_opened(h, p, err) }
    }

    /** [path] got the focus: it becomes the active file. */
    fun fileFocused(path: String) {
        val p = CStrings.arg(path, "qc_companion_file_focused", "path")
        call("qc_companion_file_focused") { h, err -> n.qc_companion_file_focused(h, p, err) }
    }

    /** The editor closed [path]. */
    fun fileClosed(path: String) {
        val p = CStrings.arg(path, "qc_companion_file_closed", "path")
        call("qc_companion_file_closed") { h, err -> n.qc_companion_file_closed(h, p, err) }
    }

    /** [oldPath] was renamed (or moved) to [newPath]. */
    fun fileRenamed(oldPath: String, newPath: String) {
        val o = CStrings.arg(oldPath, "qc_companion_file_renamed", "oldPath")
        val p = CStrings.arg(newPath, "qc_companion_file_renamed", "newPath")
        call("qc_companion_file_renamed") { h, err -> n.qc_companion_file_renamed(h, o, p, err) }
    }

    /**
     * Sets the cursor (1-based [line] and [character]) of [path], or of the
     * active file when [path] is null; another path gets the focus.
     * `INVALID_ARGUMENT` for values below 1, `NOT_FOUND` when [path] is null
     * and no file has the focus.
     */
    fun setCursor(path: String?, line: Int, character: Int) {
        if (line < 1 || character < 1) {
            throw QwenCompanionException.Call("qc_companion_set_cursor", QcStatus.INVALID_ARGUMENT.code,
                "cursor line and character are 1-based and must be at least 1 (got $line:$character)")
        }
        val p = if (path == null) null else CStrings.arg(path, "qc_companion_set_cursor", "path")
        call("qc_companion_set_cursor") { h, err -> n.qc_companion_set_cursor(h, p, line, character, err) }
    }

    /**
     * Sets the selected text of [path] (or of the active file when null);
     * null or empty [text] clears it. Long text is cut by the library.
     */
    fun setSelection(path: String?, text: String?) {
        val p = if (path == null) null else CStrings.arg(path, "qc_companion_set_selection", "path")
        val t = if (text == null || text.length == 0) null else CStrings.terminated(text)
        val len = if (t == null) 0L else (t.size - 1).toLong()
        call("qc_companion_set_selection") { h, err -> n.qc_companion_set_selection(h, p, t, len, err) }
    }

    /** Sets `isTrusted` of the workspace. */
    fun setTrusted(trusted: Boolean) =
        call("qc_companion_set_trusted") { h, err -> n.qc_companion_set_trusted(h, if (trusted) 1 else 0, err) }

    /** Replaces the whole editor state with an `IdeContext` JSON document (`INVALID_JSON` when bad). */
    fun setContextJson(ideContextJson: String) {
        val j = CStrings.terminated(ideContextJson)
        call("qc_companion_set_context_json") { h, err -> n.qc_companion_set_context_json(h, j, err) }
    }

    /** The normalised `IdeContext` JSON as clients get it (works when stopped too). */
    fun contextJson(): String =
        outString("qc_companion_context_json") { h, out, err -> n.qc_companion_context_json(h, out, err) }

    // ---- diffs -------------------------------------------------------------

    /**
     * The user accepted the diff of [path]: sends `ide/diffAccepted`. [content]
     * is the final text as the user may have edited it (null = as proposed).
     * `NOT_FOUND` when no diff is open for [path].
     */
    @JvmOverloads
    fun diffAccept(path: String, content: String? = null) {
        val p = CStrings.arg(path, "qc_companion_diff_accept", "path")
        // Always a real buffer (with a trailing NUL) so "" is sent as empty text, not as NULL.
        val c = if (content == null) null else CStrings.terminated(content)
        val len = if (c == null) 0L else (c.size - 1).toLong()
        call("qc_companion_diff_accept") { h, err -> n.qc_companion_diff_accept(h, p, c, len, err) }
    }

    /** The user rejected the diff of [path]: sends `ide/diffRejected` (`NOT_FOUND` when none is open). */
    fun diffReject(path: String) {
        val p = CStrings.arg(path, "qc_companion_diff_reject", "path")
        call("qc_companion_diff_reject") { h, err -> n.qc_companion_diff_reject(h, p, err) }
    }

    /** The user closed the diff view of [path] without deciding: sends `ide/diffClosed` (`NOT_FOUND` when none is open). */
    fun diffClosed(path: String) {
        val p = CStrings.arg(path, "qc_companion_diff_closed", "path")
        call("qc_companion_diff_closed") { h, err -> n.qc_companion_diff_closed(h, p, err) }
    }

    // ---- callbacks -------------------------------------------------------

    /**
     * Receives the library's log lines up to [maxLevel] on the `qc-cb` thread;
     * null removes the handler. Exceptions from [handler] are swallowed.
     */
    @JvmOverloads
    fun setLogHandler(handler: ((LogLevel, String) -> Unit)?, maxLevel: LogLevel = LogLevel.INFO) {
        val cb = if (handler == null) null else LogAdapter(handler)
        register("qc_companion_set_log_callback", cb, { callbacks.log = cb }) { h, token, err ->
            n.qc_companion_set_log_callback(h, cb, token, if (cb == null) null else CallbackRegistry.FREE, maxLevel.code, err)
        }
    }

    /**
     * Asked (on the `qc-cb` thread) to show a diff of `path` (absolute) with
     * `newContent`; null removes the handler (then `openDiff` answers an
     * error). Return [OpenDiffResult.Shown] once the view is up; the user's
     * decision is reported later with [diffAccept], [diffReject] or
     * [diffClosed]. An exception refuses with its text.
     */
    fun onOpenDiff(handler: ((path: String, newContent: String) -> OpenDiffResult)?) {
        val cb = if (handler == null) null else OpenDiffAdapter(library, handler)
        register("qc_companion_set_open_diff_callback", cb, { callbacks.openDiff = cb }) { h, token, err ->
            n.qc_companion_set_open_diff_callback(h, cb, token, if (cb == null) null else CallbackRegistry.FREE, err)
        }
    }

    /**
     * Asked (on the `qc-cb` thread, by the CLI's `closeDiff`) to close the diff
     * view of `path`; return the buffer's final text (null → `{"content": null}`).
     * An exception makes the tool call fail with its text. Null removes the
     * handler (then `closeDiff` answers with the proposed text).
     */
    fun onCloseDiff(handler: ((path: String) -> String?)?) {
        val cb = if (handler == null) null else CloseDiffAdapter(library, handler)
        register("qc_companion_set_close_diff_callback", cb, { callbacks.closeDiff = cb }) { h, token, err ->
            n.qc_companion_set_close_diff_callback(h, cb, token, if (cb == null) null else CallbackRegistry.FREE, err)
        }
    }

    private fun register(
        function: String,
        cb: com.sun.jna.Callback?,
        hold: () -> Unit,
        set: (Pointer, Pointer?, PointerByReference) -> Int
    ) {
        val token = if (cb == null) null else {
            Native.setCallbackThreadInitializer(cb, CALLBACK_THREAD)
            CallbackRegistry.retain(cb)
        }
        try {
            call(function) { h, err -> set(h, token, err) }
        } catch (t: Throwable) {
            if (token != null) CallbackRegistry.release(token)
            throw t
        }
        hold()
    }

    // ---- teardown --------------------------------------------------------

    /**
     * Frees the companion: stops it if running (the lock file is removed) and
     * releases the handlers. Idempotent; safe from inside a handler. If a call
     * is still running on another thread, that call frees the handle when it
     * returns.
     */
    override fun close() {
        cleanable.clean()
    }

    override fun toString(): String {
        val state = try {
            if (isClosed) "closed" else portOrNull()?.let { "port $it" } ?: "stopped"
        } catch (e: QwenCompanionException) {
            "closed"
        }
        return "QwenCompanion($state)"
    }

    companion object {
        private val CLEANER: Cleaner = Cleaner.create()

        /**
         * Callbacks run on the library's single callback thread; attach it to
         * the JVM once (as a daemon named `qc-cb`) instead of attaching and
         * detaching on every call.
         */
        private val CALLBACK_THREAD = CallbackThreadInitializer(true, false, "qc-cb")

        /** Creates a companion from a raw `config_json` (null = defaults). */
        @JvmStatic
        @JvmOverloads
        fun fromJson(configJson: String?, library: QwenCompanionLibrary = QwenCompanionLibrary.load()): QwenCompanion =
            QwenCompanion(configJson, library, Unit)

        /** The number of callback objects pinned for the library, process-wide (diagnostics). */
        @JvmStatic
        val pinnedCallbacks: Int get() = CallbackRegistry.size

        /** Best-effort text of a throwable for a reply (never throws). */
        internal fun describe(t: Throwable): String = try {
            val m = t.message
            if (m.isNullOrBlank()) t.javaClass.name else "${t.javaClass.simpleName}: $m"
        } catch (e: Throwable) {
            "exception"
        }

        /** `qc_reply_set_text`, never throwing (the reply is best effort). */
        internal fun setReply(library: QwenCompanionLibrary, reply: Pointer?, text: String) {
            try {
                if (reply == null) return
                val b = CStrings.terminated(text)
                library.native.qc_reply_set_text(reply, b, (b.size - 1).toLong(), null)
            } catch (t: Throwable) {
                // ignore: never unwind into native code
            }
        }
    }

    private class LogAdapter(val handler: (LogLevel, String) -> Unit) : QcNative.LogFn {
        override fun invoke(userData: Pointer?, level: Int, message: Pointer?) {
            try {
                handler(LogLevel.fromCode(level), CStrings.readZ(message) ?: "")
            } catch (t: Throwable) {
                // A log handler has no way to report failure; never unwind into native code.
            }
        }
    }

    private class OpenDiffAdapter(
        val library: QwenCompanionLibrary,
        val handler: (String, String) -> OpenDiffResult
    ) : QcNative.OpenDiffFn {
        override fun invoke(userData: Pointer?, filePath: Pointer?, newContent: Pointer?, newContentLen: Long, reply: Pointer?): Int {
            try {
                val path = CStrings.readZ(filePath)
                if (path == null) {
                    setReply(library, reply, "openDiff: file path is NULL")
                    return 1
                }
                val content = CStrings.read(newContent, newContentLen)
                val r = handler(path, content)
                return when (r) {
                    is OpenDiffResult.Shown -> 0
                    is OpenDiffResult.Refused -> {
                        val m = r.message
                        if (m != null) setReply(library, reply, m)
                        1
                    }
                }
            } catch (t: Throwable) {
                setReply(library, reply, "the IDE failed to open the diff: ${describe(t)}")
                return 1
            }
        }
    }

    private class CloseDiffAdapter(
        val library: QwenCompanionLibrary,
        val handler: (String) -> String?
    ) : QcNative.CloseDiffFn {
        override fun invoke(userData: Pointer?, filePath: Pointer?, reply: Pointer?): Int {
            try {
                val path = CStrings.readZ(filePath)
                if (path == null) {
                    setReply(library, reply, "closeDiff: file path is NULL")
                    return 1
                }
                val text = handler(path)
                if (text != null) setReply(library, reply, text)
                return 0
            } catch (t: Throwable) {
                setReply(library, reply, "the IDE failed to close the diff: ${describe(t)}")
                return 1
            }
        }
    }
}
