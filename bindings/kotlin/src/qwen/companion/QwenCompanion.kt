package qwen.companion

import com.sun.jna.Pointer
import com.sun.jna.ptr.PointerByReference
import com.sun.jna.ptr.ShortByReference

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
 * The CLIs one companion serves (the config's `cli`): each served CLI gets
 * its own discovery file and terminal variables; all share the one MCP
 * server (port and token).
 */
enum class CompanionCli(
    /** The config value (`"qwen"`, `"gemini"`, `"both"`). */
    val id: String,
    /** Serves Qwen Code (lock file `~/.qwen/ide/<port>.lock`). */
    val servesQwen: Boolean,
    /** Serves Gemini CLI (discovery file `<tmpdir>/gemini/ide/gemini-ide-server-<pid>-<port>.json`). */
    val servesGemini: Boolean
) {
    QWEN("qwen", true, false),
    GEMINI("gemini", false, true),
    BOTH("both", true, true);

    companion object {
        /** The value for [id] (`qwen`, `gemini`, `both`, any case); null for anything else. */
        @JvmStatic
        fun fromId(id: String?): CompanionCli? {
            val t = id?.trim() ?: return null
            for (c in values()) if (c.id.equals(t, ignoreCase = true)) return c
            return null
        }
    }
}

/**
 * The discovery files of a running companion (`qc_companion_discovery_files_json`):
 * the path of each served CLI's file, null for a CLI not served.
 */
data class DiscoveryFiles(
    /** Qwen Code's lock file, e.g. `~/.qwen/ide/41234.lock`. */
    val qwen: String?,
    /** Gemini CLI's discovery file, e.g. `/tmp/gemini/ide/gemini-ide-server-123-41234.json`. */
    val gemini: String?
) {
    /** The files that exist for this companion, keyed `qwen` / `gemini` (served CLIs only, in that order). */
    fun toMap(): Map<String, String> {
        val m = LinkedHashMap<String, String>()
        if (qwen != null) m["qwen"] = qwen
        if (gemini != null) m["gemini"] = gemini
        return m
    }

    companion object {
        /**
         * Parses the library's JSON (`{"qwen": path|null, "gemini": path|null}`);
         * throws [IllegalArgumentException] for anything else.
         */
        @JvmStatic
        fun parse(json: String): DiscoveryFiles {
            val m = Json.parseObject(json)
            fun field(name: String): String? {
                val v = m[name]
                if (v != null && v !is String) throw IllegalArgumentException("discovery files: \"$name\" is not a string or null: $json")
                return v as String?
            }
            return DiscoveryFiles(field("qwen"), field("gemini"))
        }
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
    val keepAliveMs: Long? = null,
    /**
     * How long the CLI's `openDiff` / `closeDiff` wait for the handlers (or a
     * pull-mode answer) before the CLI gets an error (library default 30000;
     * 100..600000). A handler that waits for the UI should give up a little earlier.
     */
    val requestTimeoutMs: Long? = null,
    /** Which CLIs to serve (library default [CompanionCli.QWEN]). */
    val cli: CompanionCli? = null,
    /**
     * Folder of Gemini CLI's discovery file (default `<os.tmpdir()>/gemini/ide`,
     * where Gemini CLI looks; set it only for tests, together with the CLI's `TMPDIR`).
     */
    val geminiDir: String? = null
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
        if (requestTimeoutMs != null) m["requestTimeoutMs"] = requestTimeoutMs
        if (cli != null) m["cli"] = cli.id
        if (geminiDir != null) m["geminiDir"] = geminiDir
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
 * the exception's text, and the exception is also reported to the log
 * handler ([setLogHandler], level ERROR); nothing ever unwinds into native code.
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
    private val handle = NativeHandle(
        this, "QwenCompanion", library, "qc_companion_new", configJson,
        QcNative::qc_companion_new, QcNative::qc_companion_free
    )

    /** True after [close]. */
    val isClosed: Boolean get() = handle.isClosed

    /** `function(handle, path, error)`. */
    private fun pathCall(function: String, path: String, f: (Pointer?, ByteArray?, PointerByReference?) -> Int) {
        val p = CStrings.arg(path, function, "path")
        handle.call(function) { h, err -> f(h, p, err) }
    }

    // ---- lifecycle -------------------------------------------------------

    /** Binds 127.0.0.1 on a free port and writes the lock file (`ALREADY_RUNNING` if running). */
    fun start() = handle.call("qc_companion_start") { h, err -> n.qc_companion_start(h, err) }

    /** Closes every client session and removes the lock file (`NOT_RUNNING` if not running). */
    fun stop() = handle.call("qc_companion_stop") { h, err -> n.qc_companion_stop(h, err) }

    /** The listening port (`NOT_RUNNING` when stopped). */
    fun port(): Int {
        val out = ShortByReference()
        return handle.call("qc_companion_port", { h, err -> n.qc_companion_port(h, out, err) }) {
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

    /**
     * Path of the lock file `<lockDir>/<port>.lock`; when only Gemini CLI is
     * served, its discovery file (`NOT_RUNNING` when stopped).
     */
    fun lockFilePath(): String =
        handle.outString("qc_companion_lock_file_path") { h, out, err -> n.qc_companion_lock_file_path(h, out, err) }

    /** The discovery files as the library's JSON object text (`{"qwen": path|null, "gemini": path|null}`). */
    fun discoveryFilesJson(): String =
        handle.outString("qc_companion_discovery_files_json") { h, out, err -> n.qc_companion_discovery_files_json(h, out, err) }

    /**
     * The discovery file of each CLI served (null for a CLI not served):
     * Qwen Code's lock file and Gemini CLI's
     * `gemini-ide-server-<pid>-<port>.json`; `NOT_RUNNING` when stopped.
     */
    fun discoveryFiles(): DiscoveryFiles = DiscoveryFiles.parse(discoveryFilesJson())

    /**
     * The diffs waiting for a decision and which CLI proposed each:
     * `{"clients": N, "diffs": [{"filePath", "session": {"id", "label"}}]}`
     * (`label` is `CLI #1`, `CLI #2`, … in connection order; Qwen Code sends
     * no name of its own). Allowed inside the open-diff handler (the diff is
     * recorded by then).
     */
    fun openDiffs(): Map<String, Any?> =
        Json.parseObject(handle.outString("qc_companion_open_diffs_json") { h, out, err -> n.qc_companion_open_diffs_json(h, out, err) })

    /** Runs [block] with the native handle borrowed (for [QwenHealth]). */
    internal fun <T> borrowRaw(block: (Pointer) -> T): T = handle.borrow(block)

    /** The terminal environment as the library's JSON object text. */
    fun terminalEnvJson(): String =
        handle.outString("qc_companion_terminal_env_json") { h, out, err -> n.qc_companion_terminal_env_json(h, out, err) }

    /**
     * Variables to set in the IDE's integrated terminals, those of every CLI
     * served (`QWEN_CODE_IDE_SERVER_PORT`, `QWEN_CODE_IDE_WORKSPACE_PATH`;
     * `GEMINI_CLI_IDE_SERVER_PORT`, `GEMINI_CLI_IDE_WORKSPACE_PATH`,
     * `GEMINI_CLI_IDE_PID`); `NOT_RUNNING` when stopped. Put all of them into
     * every terminal, whichever CLI it runs.
     */
    fun terminalEnv(): Map<String, String> {
        val m = LinkedHashMap<String, String>()
        for ((k, v) in Json.parseObject(terminalEnvJson())) m[k] = v?.toString() ?: ""
        return m
    }

    /** Replaces the workspace roots (absolute paths); rewrites the discovery files when running. */
    fun setWorkspaceRoots(roots: List<String>) {
        val json = CStrings.terminated(Json.write(roots))
        handle.call("qc_companion_set_workspace_roots_json") { h, err -> n.qc_companion_set_workspace_roots_json(h, json, err) }
    }

    // ---- editor context --------------------------------------------------

    /** The editor opened [path] (not necessarily focused). */
    fun fileOpened(path: String) = pathCall("qc_companion_file_opened", path, n::qc_companion_file_opened)

    /** [path] got the focus: it becomes the active file. */
    fun fileFocused(path: String) = pathCall("qc_companion_file_focused", path, n::qc_companion_file_focused)

    /** The editor closed [path]. */
    fun fileClosed(path: String) = pathCall("qc_companion_file_closed", path, n::qc_companion_file_closed)

    /** [oldPath] was renamed (or moved) to [newPath]. */
    fun fileRenamed(oldPath: String, newPath: String) {
        val o = CStrings.arg(oldPath, "qc_companion_file_renamed", "oldPath")
        val p = CStrings.arg(newPath, "qc_companion_file_renamed", "newPath")
        handle.call("qc_companion_file_renamed") { h, err -> n.qc_companion_file_renamed(h, o, p, err) }
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
        handle.call("qc_companion_set_cursor") { h, err -> n.qc_companion_set_cursor(h, p, line, character, err) }
    }

    /**
     * Sets the selected text of [path] (or of the active file when null);
     * null or empty [text] clears it. Long text is cut by the library.
     */
    fun setSelection(path: String?, text: String?) {
        val p = if (path == null) null else CStrings.arg(path, "qc_companion_set_selection", "path")
        val t = if (text == null || text.length == 0) null else CStrings.terminated(text)
        val len = if (t == null) 0L else (t.size - 1).toLong()
        handle.call("qc_companion_set_selection") { h, err -> n.qc_companion_set_selection(h, p, t, len, err) }
    }

    /** Sets `isTrusted` of the workspace. */
    fun setTrusted(trusted: Boolean) =
        handle.call("qc_companion_set_trusted") { h, err -> n.qc_companion_set_trusted(h, if (trusted) 1 else 0, err) }

    /** Replaces the whole editor state with an `IdeContext` JSON document (`INVALID_JSON` when bad). */
    fun setContextJson(ideContextJson: String) {
        val j = CStrings.terminated(ideContextJson)
        handle.call("qc_companion_set_context_json") { h, err -> n.qc_companion_set_context_json(h, j, err) }
    }

    /** The normalised `IdeContext` JSON as clients get it (works when stopped too). */
    fun contextJson(): String =
        handle.outString("qc_companion_context_json") { h, out, err -> n.qc_companion_context_json(h, out, err) }

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
        handle.call("qc_companion_diff_accept") { h, err -> n.qc_companion_diff_accept(h, p, c, len, err) }
    }

    /** The user rejected the diff of [path]: sends `ide/diffRejected` (`NOT_FOUND` when none is open). */
    fun diffReject(path: String) = pathCall("qc_companion_diff_reject", path, n::qc_companion_diff_reject)

    /** The user closed the diff view of [path] without deciding: sends `ide/diffClosed` (`NOT_FOUND` when none is open). */
    fun diffClosed(path: String) = pathCall("qc_companion_diff_closed", path, n::qc_companion_diff_closed)

    // ---- callbacks -------------------------------------------------------

    /**
     * Receives the library's log lines up to [maxLevel] on the `qc-cb` thread;
     * null removes the handler. Exceptions from [handler] are swallowed.
     */
    @JvmOverloads
    fun setLogHandler(handler: ((LogLevel, String) -> Unit)?, maxLevel: LogLevel = LogLevel.INFO) =
        handle.setLogHandler("qc_companion_set_log_callback", handler, maxLevel, QcNative::qc_companion_set_log_callback)

    /**
     * Asked (on the `qc-cb` thread) to show a diff of `path` (absolute) with
     * `newContent`; null removes the handler (then `openDiff` answers an
     * error). Return [OpenDiffResult.Shown] once the view is up; the user's
     * decision is reported later with [diffAccept], [diffReject] or
     * [diffClosed]. An exception refuses with its text.
     */
    fun onOpenDiff(handler: ((path: String, newContent: String) -> OpenDiffResult)?) {
        val get = handle.hold("openDiff", handler)
        val cb: QcNative.OpenDiffFn? = if (handler == null) null else OpenDiffAdapter(library, handle.reporter, get)
        handle.register("qc_companion_set_open_diff_callback", cb, QcNative::qc_companion_set_open_diff_callback)
    }

    /**
     * Asked (on the `qc-cb` thread, by the CLI's `closeDiff`) to close the diff
     * view of `path`; return the buffer's final text (null → `{"content": null}`).
     * An exception makes the tool call fail with its text. Null removes the
     * handler (then `closeDiff` answers with the proposed text).
     */
    fun onCloseDiff(handler: ((path: String) -> String?)?) {
        val get = handle.hold("closeDiff", handler)
        val cb: QcNative.CloseDiffFn? = if (handler == null) null else CloseDiffAdapter(library, handle.reporter, get)
        handle.register("qc_companion_set_close_diff_callback", cb, QcNative::qc_companion_set_close_diff_callback)
    }

    // ---- teardown --------------------------------------------------------

    /**
     * Frees the companion: stops it if running (the lock file is removed) and
     * releases the handlers. Idempotent; safe from inside a handler. If a call
     * is still running on another thread, that call frees the handle when it
     * returns.
     */
    override fun close() = handle.close()

    override fun toString(): String = handle.describeAs { portOrNull()?.let { "port $it" } ?: "stopped" }

    companion object {
        /** Creates a companion from a raw `config_json` (null = defaults). */
        @JvmStatic
        @JvmOverloads
        fun fromJson(configJson: String?, library: QwenCompanionLibrary = QwenCompanionLibrary.load()): QwenCompanion =
            QwenCompanion(configJson, library, Unit)

        /** The number of callback objects pinned for the library, process-wide (diagnostics). */
        @JvmStatic
        val pinnedCallbacks: Int get() = CallbackRegistry.size

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

    /**
     * What both diff adapters share: the path check, and a failure reply with
     * the text of whatever the handler throws, which also goes to the log
     * handler (nothing unwinds into native code).
     */
    private abstract class DiffAdapter(
        val library: QwenCompanionLibrary,
        private val reporter: NativeHandle.Reporter,
        private val tool: String,
        private val failure: String
    ) {
        /** Runs [decide] with the path; it returns 0 (done) or 1 (refused). */
        protected fun answer(filePath: Pointer?, reply: Pointer?, decide: (String) -> Int): Int {
            try {
                val path = CStrings.readZ(filePath)
                if (path == null) {
                    setReply(library, reply, "$tool: file path is NULL")
                    return 1
                }
                return decide(path)
            } catch (t: Throwable) {
                reporter.failed(tool, t)
                setReply(library, reply, "$failure: ${NativeHandle.describe(t)}")
                return 1
            }
        }
    }

    private class OpenDiffAdapter(
        library: QwenCompanionLibrary,
        reporter: NativeHandle.Reporter,
        /** Weak (see [NativeHandle.hold]). */
        val handler: () -> ((String, String) -> OpenDiffResult)?
    ) : DiffAdapter(library, reporter, "openDiff", "the IDE failed to open the diff"), QcNative.OpenDiffFn {
        override fun invoke(userData: Pointer?, filePath: Pointer?, newContent: Pointer?, newContentLen: Long, reply: Pointer?): Int =
            answer(filePath, reply) { path ->
                val h = handler() ?: throw IllegalStateException(NativeHandle.GONE)
                val r = h(path, CStrings.read(newContent, newContentLen))
                when (r) {
                    is OpenDiffResult.Shown -> 0
                    is OpenDiffResult.Refused -> {
                        val m = r.message
                        if (m != null) setReply(library, reply, m)
                        1
                    }
                }
            }
    }

    private class CloseDiffAdapter(
        library: QwenCompanionLibrary,
        reporter: NativeHandle.Reporter,
        /** Weak (see [NativeHandle.hold]). */
        val handler: () -> ((String) -> String?)?
    ) : DiffAdapter(library, reporter, "closeDiff", "the IDE failed to close the diff"), QcNative.CloseDiffFn {
        override fun invoke(userData: Pointer?, filePath: Pointer?, reply: Pointer?): Int =
            answer(filePath, reply) { path ->
                val h = handler() ?: throw IllegalStateException(NativeHandle.GONE)
                val text = h(path)
                if (text != null) setReply(library, reply, text)
                0
            }
    }
}
