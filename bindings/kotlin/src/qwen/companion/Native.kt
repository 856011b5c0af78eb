package qwen.companion

import com.sun.jna.Callback
import com.sun.jna.CallbackThreadInitializer
import com.sun.jna.Library
import com.sun.jna.Native
import com.sun.jna.Pointer
import com.sun.jna.NativeLibrary
import com.sun.jna.ptr.IntByReference
import com.sun.jna.ptr.PointerByReference
import com.sun.jna.ptr.ShortByReference
import java.io.File
import java.lang.reflect.Proxy
import java.nio.charset.StandardCharsets
import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.atomic.AtomicLong

/**
 * The raw C API of `libqwen_companion` (include/qwen_companion.h, ABI 1), one
 * method per C function, names and argument order exactly as in C.
 *
 * Mapping rules (they matter; see STYLE-ANCHORS "Kotlin"):
 * - handles (`qc_companion *`, `qc_reply *`) are [Pointer];
 * - input strings are NUL-terminated UTF-8 [ByteArray]s built by the binding
 *   (never `String`, so the platform charset never gets a say);
 * - owned output strings (`char **out`, `char **error`) are
 *   [PointerByReference], read and then freed with [qc_string_free]; static
 *   strings (`qc_version`, `qc_status_name`) are [Pointer]s that are only read;
 * - `uint32_t` is [Int], `uint16_t *` is [ShortByReference], `size_t` and
 *   `uint64_t` are [Long] (64-bit; [QwenCompanionLibrary.load] refuses
 *   platforms where `size_t` is not).
 *
 * [QwenCompanionLibrary.load] checks that every function declared here
 * exists in the library (JNA would otherwise fail only at the first call).
 *
 * Use [QwenCompanion] instead; this interface is public for hosts that need a
 * function the wrapper does not cover yet.
 */
@Suppress("FunctionName")
interface QcNative : Library {
    /** `qc_log_fn`. */
    interface LogFn : Callback {
        fun invoke(userData: Pointer?, level: Int, message: Pointer?)
    }

    /** `qc_free_fn`. */
    interface FreeFn : Callback {
        fun invoke(userData: Pointer?)
    }

    /** `qc_open_diff_fn`. */
    interface OpenDiffFn : Callback {
        fun invoke(userData: Pointer?, filePath: Pointer?, newContent: Pointer?, newContentLen: Long, reply: Pointer?): Int
    }

    /** `qc_close_diff_fn`. */
    interface CloseDiffFn : Callback {
        fun invoke(userData: Pointer?, filePath: Pointer?, reply: Pointer?): Int
    }

    /** `qc_json_fn`: one JSON document, borrowed for the call. */
    interface JsonFn : Callback {
        fun invoke(userData: Pointer?, json: Pointer?)
    }

    /** `qc_plugin_capability_fn`: `(user_data, request_id, request_json)`, the JSON borrowed for the call. */
    interface CapabilityFn : Callback {
        fun invoke(userData: Pointer?, requestId: Long, requestJson: Pointer?)
    }

    fun qc_version(): Pointer?
    fun qc_abi_version(): Int
    fun qc_status_name(status: Int): Pointer?
    fun qc_string_free(s: Pointer?)

    fun qc_companion_new(configJson: ByteArray?, out: PointerByReference, error: PointerByReference?): Int
    fun qc_companion_free(c: Pointer?): Int
    fun qc_companion_start(c: Pointer?, error: PointerByReference?): Int
    fun qc_companion_stop(c: Pointer?, error: PointerByReference?): Int
    fun qc_companion_port(c: Pointer?, out: ShortByReference, error: PointerByReference?): Int
    fun qc_companion_lock_file_path(c: Pointer?, out: PointerByReference, error: PointerByReference?): Int
    fun qc_companion_terminal_env_json(c: Pointer?, out: PointerByReference, error: PointerByReference?): Int
    fun qc_companion_discovery_files_json(c: Pointer?, out: PointerByReference, error: PointerByReference?): Int
    fun qc_companion_set_workspace_roots_json(c: Pointer?, rootsJson: ByteArray?, error: PointerByReference?): Int

    fun qc_companion_file_opened(c: Pointer?, path: ByteArray?, error: PointerByReference?): Int
    fun qc_companion_file_focused(c: Pointer?, path: ByteArray?, error: PointerByReference?): Int
    fun qc_companion_file_closed(c: Pointer?, path: ByteArray?, error: PointerByReference?): Int

    fun qc_companion_file_renamed(c: Pointer?, oldPath: ByteArray?, newPath: ByteArray?, error: PointerByReference?): Int
    fun qc_companion_set_cursor(c: Pointer?, path: ByteArray?, line: Int, character: Int, error: PointerByReference?): Int
    fun qc_companion_set_selection(c: Pointer?, path: ByteArray?, text: ByteArray?, len: Long, error: PointerByReference?): Int
    fun qc_companion_set_trusted(c: Pointer?, trusted: Int, error: PointerByReference?): Int
    fun qc_companion_set_context_json(c: Pointer?, ideContextJson: ByteArray?, error: PointerByReference?): Int
    fun qc_companion_context_json(c: Pointer?, out: PointerByReference, error: PointerByReference?): Int
    fun qc_companion_diff_accept(c: Pointer?, path: ByteArray?, content: ByteArray?, len: Long, error: PointerByReference?): Int
    fun qc_companion_diff_reject(c: Pointer?, path: ByteArray?, error: PointerByReference?): Int
    fun qc_companion_diff_closed(c: Pointer?, path: ByteArray?, error: PointerByReference?): Int

    fun qc_companion_set_log_callback(c: Pointer?, cb: LogFn?, userData: Pointer?, freeUserData: FreeFn?, maxLevel: Int, error: PointerByReference?): Int
    fun qc_companion_set_open_diff_callback(c: Pointer?, cb: OpenDiffFn?, userData: Pointer?, freeUserData: FreeFn?, error: PointerByReference?): Int
    fun qc_companion_set_close_diff_callback(c: Pointer?, cb: CloseDiffFn?, userData: Pointer?, freeUserData: FreeFn?, error: PointerByReference?): Int

    fun qc_reply_set_text(reply: Pointer?, text: ByteArray?, len: Long, error: PointerByReference?): Int

    // Pull mode (hosts that must not be called on a library thread); QwenCompanion does not use it.
    fun qc_companion_enable_events(c: Pointer?, outFd: IntByReference, error: PointerByReference?): Int
    fun qc_companion_next_event(c: Pointer?, outJson: PointerByReference, error: PointerByReference?): Int
    fun qc_companion_respond(c: Pointer?, id: Long, ok: Int, text: ByteArray?, len: Long, error: PointerByReference?): Int

    // Cross-session participant (see QwenParticipant). `qc_participant *` is a Pointer.
    fun qc_participant_new(configJson: ByteArray?, out: PointerByReference, error: PointerByReference?): Int
    fun qc_participant_free(p: Pointer?): Int
    fun qc_participant_close(p: Pointer?, error: PointerByReference?): Int
    fun qc_participant_register(p: Pointer?, optionsJson: ByteArray?, outSessionJson: PointerByReference, error: PointerByReference?): Int
    fun qc_participant_unregister(p: Pointer?, sessionId: ByteArray?, error: PointerByReference?): Int
    fun qc_participant_rotate_session_id(p: Pointer?, sessionId: ByteArray?, newSessionId: ByteArray?, outSessionJson: PointerByReference, error: PointerByReference?): Int
    fun qc_participant_sessions_json(p: Pointer?, outJson: PointerByReference, error: PointerByReference?): Int
    fun qc_participant_child_env_json(p: Pointer?, sessionId: ByteArray?, outJson: PointerByReference, error: PointerByReference?): Int
    fun qc_participant_list_json(p: Pointer?, outJson: PointerByReference, error: PointerByReference?): Int
    fun qc_participant_peers_json(p: Pointer?, fromSession: ByteArray?, outJson: PointerByReference, error: PointerByReference?): Int
    fun qc_participant_resolve_json(p: Pointer?, address: ByteArray?, fromSession: ByteArray?, outJson: PointerByReference, error: PointerByReference?): Int
    fun qc_participant_send(p: Pointer?, optionsJson: ByteArray?, outResultJson: PointerByReference, error: PointerByReference?): Int
    fun qc_participant_send_to_parent(p: Pointer?, optionsJson: ByteArray?, outResultJson: PointerByReference, error: PointerByReference?): Int
    fun qc_participant_send_state_json(p: Pointer?, msgId: ByteArray?, outJson: PointerByReference, error: PointerByReference?): Int
    fun qc_participant_wait(p: Pointer?, msgId: ByteArray?, timeoutMs: Int, finalOnly: Int, outJson: PointerByReference, error: PointerByReference?): Int
    fun qc_participant_held_json(p: Pointer?, outJson: PointerByReference, error: PointerByReference?): Int
    fun qc_participant_release(p: Pointer?, msgId: ByteArray?, error: PointerByReference?): Int
    fun qc_participant_deny(p: Pointer?, msgId: ByteArray?, error: PointerByReference?): Int
    fun qc_participant_ack(p: Pointer?, msgId: ByteArray?, error: PointerByReference?): Int
    fun qc_participant_inbound_settings_json(p: Pointer?, sessionId: ByteArray?, outJson: PointerByReference, error: PointerByReference?): Int
    fun qc_participant_update_inbound(p: Pointer?, sessionId: ByteArray?, settingsJson: ByteArray?, error: PointerByReference?): Int
    fun qc_participant_ipc_path(p: Pointer?, out: PointerByReference, error: PointerByReference?): Int
    fun qc_participant_enable_events(p: Pointer?, outFd: IntByReference, error: PointerByReference?): Int
    fun qc_participant_next_event(p: Pointer?, outJson: PointerByReference, error: PointerByReference?): Int
    fun qc_participant_set_log_callback(p: Pointer?, cb: LogFn?, userData: Pointer?, freeUserData: FreeFn?, maxLevel: Int, error: PointerByReference?): Int
    fun qc_participant_set_message_callback(p: Pointer?, cb: JsonFn?, userData: Pointer?, freeUserData: FreeFn?, error: PointerByReference?): Int
    fun qc_participant_set_receipt_callback(p: Pointer?, cb: JsonFn?, userData: Pointer?, freeUserData: FreeFn?, error: PointerByReference?): Int
    fun qc_participant_set_held_callback(p: Pointer?, cb: JsonFn?, userData: Pointer?, freeUserData: FreeFn?, error: PointerByReference?): Int

    // Plugin host (see QwenPluginHost). `qc_plugin_host *` is a Pointer; the
    // `errorJson` parameters are the nullable `char **error_json`.
    fun qc_plugin_host_new(configJson: ByteArray?, out: PointerByReference, error: PointerByReference?): Int
    fun qc_plugin_host_free(h: Pointer?): Int
    fun qc_plugin_host_plugins_dir(h: Pointer?, out: PointerByReference, error: PointerByReference?): Int
    fun qc_plugin_host_reload(h: Pointer?, error: PointerByReference?): Int
    fun qc_plugin_host_startup_finished(h: Pointer?, outJson: PointerByReference, error: PointerByReference?): Int
    fun qc_plugin_host_unload(h: Pointer?, id: ByteArray?, errorJson: PointerByReference?, error: PointerByReference?): Int
    fun qc_plugin_host_enable(h: Pointer?, id: ByteArray?, error: PointerByReference?): Int
    fun qc_plugin_host_mcp_start(h: Pointer?, configJson: ByteArray?, error: PointerByReference?): Int
    fun qc_plugin_host_mcp_stop(h: Pointer?, error: PointerByReference?): Int
    fun qc_plugin_host_mcp_info(h: Pointer?, outJson: PointerByReference, error: PointerByReference?): Int
    fun qc_plugin_host_views_start(h: Pointer?, configJson: ByteArray?, outInfoJson: PointerByReference?, error: PointerByReference?): Int
    fun qc_plugin_host_views_stop(h: Pointer?, error: PointerByReference?): Int
    fun qc_plugin_host_views_json(h: Pointer?, outJson: PointerByReference, error: PointerByReference?): Int
    fun qc_plugin_host_view_url(h: Pointer?, pluginId: ByteArray?, viewId: ByteArray?, outUrl: PointerByReference, error: PointerByReference?): Int
    fun qc_plugin_host_set_color_scheme(h: Pointer?, scheme: ByteArray?, error: PointerByReference?): Int
    fun qc_mcp_register(optionsJson: ByteArray?, outJson: PointerByReference, error: PointerByReference?): Int
    fun qc_mcp_unregister(optionsJson: ByteArray?, outJson: PointerByReference, error: PointerByReference?): Int
    fun qc_plugin_host_disable(h: Pointer?, id: ByteArray?, error: PointerByReference?): Int
    fun qc_plugin_host_set_config_value(h: Pointer?, id: ByteArray?, key: ByteArray?, valueJson: ByteArray?, error: PointerByReference?): Int
    fun qc_plugin_host_install(h: Pointer?, srcPath: ByteArray?, outJson: PointerByReference, errorJson: PointerByReference?, error: PointerByReference?): Int
    fun qc_plugin_host_uninstall(h: Pointer?, id: ByteArray?, removeData: Int, outJson: PointerByReference, errorJson: PointerByReference?, error: PointerByReference?): Int
    fun qc_plugin_host_list(h: Pointer?, outJson: PointerByReference, errorJson: PointerByReference?, error: PointerByReference?): Int
    fun qc_plugin_host_call(h: Pointer?, pluginId: ByteArray?, tool: ByteArray?, paramsJson: ByteArray?, optionsJson: ByteArray?, outJson: PointerByReference, errorJson: PointerByReference?, error: PointerByReference?): Int
    fun qc_plugin_host_call_async(h: Pointer?, pluginId: ByteArray?, tool: ByteArray?, paramsJson: ByteArray?, optionsJson: ByteArray?, onDone: JsonFn?, userData: Pointer?, freeUserData: FreeFn?, error: PointerByReference?): Int
    fun qc_plugin_host_visible(h: Pointer?, pluginId: ByteArray?, cwd: ByteArray?, out: IntByReference, errorJson: PointerByReference?, error: PointerByReference?): Int
    fun qc_plugin_host_options(h: Pointer?, pluginId: ByteArray?, configId: ByteArray?, outJson: PointerByReference, errorJson: PointerByReference?, error: PointerByReference?): Int
    fun qc_plugin_host_parse_document(h: Pointer?, mime: ByteArray?, data: ByteArray?, len: Long, outJson: PointerByReference, errorJson: PointerByReference?, error: PointerByReference?): Int
    fun qc_plugin_host_set_event_callback(h: Pointer?, cb: JsonFn?, userData: Pointer?, freeUserData: FreeFn?, error: PointerByReference?): Int
    fun qc_plugin_host_set_log_callback(h: Pointer?, cb: LogFn?, userData: Pointer?, freeUserData: FreeFn?, maxLevel: Int, error: PointerByReference?): Int
    fun qc_plugin_host_set_capability_callback(h: Pointer?, name: ByteArray?, cb: CapabilityFn?, userData: Pointer?, freeUserData: FreeFn?, error: PointerByReference?): Int
    fun qc_plugin_host_offer_capability(h: Pointer?, name: ByteArray?, error: PointerByReference?): Int
    fun qc_plugin_host_respond(h: Pointer?, requestId: Long, resultJson: ByteArray?, errorMessage: ByteArray?, error: PointerByReference?): Int
    fun qc_plugin_host_enable_events(h: Pointer?, outFd: IntByReference, error: PointerByReference?): Int
    fun qc_plugin_host_next_event(h: Pointer?, outJson: PointerByReference, error: PointerByReference?): Int
    fun qc_plugin_host_stats(h: Pointer?, pluginId: ByteArray?, outJson: PointerByReference, error: PointerByReference?): Int

    // Health report and the open diffs with their proposing session (see QwenHealth, QwenCompanion.openDiffs).
    fun qc_health_json(optionsJson: ByteArray?, c: Pointer?, h: Pointer?, p: Pointer?, outJson: PointerByReference, error: PointerByReference?): Int
    fun qc_companion_open_diffs_json(c: Pointer?, outJson: PointerByReference, error: PointerByReference?): Int
}

/**
 * The loaded native library, checked for the ABI this binding was written for.
 *
 * Lookup order ([load]): an explicit path; else the `QWEN_COMPANION_LIB`
 * environment variable (a file path); else a folder of `-Djna.library.path`
 * holding the library; else the library the distribution jar carries for this
 * platform ([QcBundled], copied to `<qwen home>/companion/lib/`); else JNA's
 * search for `qwen_companion` (system paths).
 */
class QwenCompanionLibrary private constructor(
    /** The raw C API. */
    val native: QcNative,
    /** Where the library was loaded from (a path, or the name JNA resolved). */
    val location: String
) {
    /** `qc_version()`, e.g. `"0.1.0"`. */
    val version: String = native.qc_version()?.getString(0, UTF8) ?: "?"

    /** `qc_abi_version()`. */
    val abiVersion: Int get() = native.qc_abi_version()

    /** `qc_status_name(code)`, e.g. `"QC_NOT_FOUND"` (`"QC_UNKNOWN"` for codes not in the table). */
    fun statusName(code: Int): String = native.qc_status_name(code)?.getString(0, UTF8) ?: "QC_UNKNOWN"

    /** Reads and frees an owned string (NULL gives `null`). */
    internal fun takeString(p: Pointer?): String? {
        if (p == null) return null
        try {
            return p.getString(0, UTF8)
        } finally {
            native.qc_string_free(p)
        }
    }

    /**
     * Turns a status into an exception (freeing the error string in every
     * case). [error] is the `char **error` of that call.
     */
    internal fun check(function: String, status: Int, error: PointerByReference) {
        val message = takeString(error.value)
        if (status != 0) {
            throw QwenCompanionException.Call(function, status, message ?: statusName(status))
        }
    }

    override fun toString(): String = "qwen-companion $version (ABI $abiVersion) from $location"

    companion object {
        /** The `QC_ABI_VERSION` this binding was written for. */
        const val ABI_VERSION = 1

        /** Environment variable naming the library file. */
        const val ENV_VAR = "QWEN_COMPANION_LIB"

        /** The library's base name for JNA's search (`libqwen_companion.so`, `.dylib`, `qwen_companion.dll`). */
        const val LIBRARY_NAME = "qwen_companion"

        internal const val UTF8 = "UTF-8"

        private val loaded = ConcurrentHashMap<String, QwenCompanionLibrary>()

        /**
         * Loads (once per location) and checks the library. [explicitPath], when
         * not blank, wins over the environment and JNA's search.
         *
         * @throws QwenCompanionException.Load when the library cannot be
         *   found or loaded, or `qc_abi_version()` is not [ABI_VERSION].
         */
        @JvmStatic
        @JvmOverloads
        fun load(explicitPath: String? = null): QwenCompanionLibrary {
            val env = System.getenv(ENV_VAR)
            val searchPath = System.getProperty("jna.library.path")
            val searchHit = searchPath?.split(File.pathSeparator)?.any { it.isNotEmpty() && File(it, QcPlatform.libraryFileName()).isFile } == true
            val (target, how) = when {
                explicitPath != null && explicitPath.isNotBlank() -> Pair(explicitPath, "the explicit path")
                env != null && env.isNotBlank() -> Pair(env, "\$$ENV_VAR")
                searchHit -> Pair(LIBRARY_NAME, "JNA's search for ${QcPlatform.libraryFileName()} (jna.library.path=$searchPath)")
                QcBundled.hasLibrary() -> Pair("", "the library this jar carries for ${QcBundled.prefix}")
                else -> Pair(LIBRARY_NAME, "JNA's search for ${QcPlatform.libraryFileName()} (jna.library.path=${searchPath ?: "<unset>"}, then system paths; " +
                    if (QcBundled.version == null) "this jar carries no native files)" else "this jar has none for ${QcPlatform.libraryFileName()} on ${QcBundled.prefix}, only ${QcBundled.prefixes.joinToString(", ")})")
            }
            if (target.isEmpty()) {
                bundled?.let { return it }
                synchronized(loaded) {
                    bundled?.let { return it }
                    val file = try {
                        QcBundled.extractLibrary()
                    } catch (e: java.io.IOException) {
                        throw QwenCompanionException.Load("cannot copy the qwen-companion library out of the jar: ${e.message}", e)
                    }
                    return loadLocked(file.absolutePath, how).also { bundled = it }
                }
            }
            val key = if (target == LIBRARY_NAME) target else File(target).absolutePath
            loaded[key]?.let { return it }
            synchronized(loaded) {
                return loadLocked(key, how)
            }
        }

        /** The library copied out of the jar (one per JVM, whatever its path). */
        @Volatile
        private var bundled: QwenCompanionLibrary? = null

        private fun loadLocked(key: String, how: String): QwenCompanionLibrary {
            loaded[key]?.let { return it }
            if (key != LIBRARY_NAME && !File(key).isFile) {
                throw QwenCompanionException.Load("qwen-companion library not found: $key (from $how) is not a file")
            }
            val native = try {
                Native.load(key, QcNative::class.java) as QcNative
            } catch (e: Throwable) {
                throw QwenCompanionException.Load(
                    "cannot load the qwen-companion library via $how: ${e.message}. " +
                        "Pass an explicit path, set $ENV_VAR to the library file, or run with -Djna.library.path=<the folder of ${QcPlatform.libraryFileName()}>.",
                    e
                )
            }
            if (Native.SIZE_T_SIZE != 8) {
                throw QwenCompanionException.Load("the Kotlin binding maps size_t to a 64-bit Long; this platform's size_t is ${Native.SIZE_T_SIZE} bytes")
            }
            val abi = try {
                native.qc_abi_version()
            } catch (e: Throwable) {
                throw QwenCompanionException.Load("$key (from $how) is not a qwen-companion library: qc_abi_version is missing (${e.message})", e)
            }
            checkAbi(abi, key)
            checkSymbols(native, key)
            val lib = QwenCompanionLibrary(native, key)
            loaded[key] = lib
            return lib
        }

        /**
         * Throws [QwenCompanionException.Load] naming every function of
         * [QcNative] the library lacks (a library older than this binding).
         */
        private fun checkSymbols(native: QcNative, location: String) {
            val library: NativeLibrary = try {
                (Proxy.getInvocationHandler(native) as Library.Handler).nativeLibrary
            } catch (e: Throwable) {
                return // not a JNA proxy (cannot happen with Native.load); the first call would tell
            }
            val missing = ArrayList<String>()
            for (m in QcNative::class.java.declaredMethods) {
                if (!m.name.startsWith("qc_")) continue
                try {
                    library.getFunction(m.name)
                } catch (e: UnsatisfiedLinkError) {
                    missing.add(m.name)
                }
            }
            if (missing.isNotEmpty()) {
                missing.sort()
                throw QwenCompanionException.Load(
                    "$location (ABI $ABI_VERSION) lacks functions this Kotlin binding needs: ${missing.joinToString(", ")}; " +
                        "use a library and binding from the same release"
                )
            }
        }

        /** Throws [QwenCompanionException.Load] unless [abi] is [ABI_VERSION]. */
        @JvmStatic
        fun checkAbi(abi: Int, location: String) {
            if (abi != ABI_VERSION) {
                throw QwenCompanionException.Load(
                    "qwen-companion ABI mismatch: $location reports ABI version $abi, this Kotlin binding needs $ABI_VERSION; " +
                        "use the binding that matches the library (or rebuild the library)"
                )
            }
        }
    }
}

/**
 * Keeps callback objects alive for exactly as long as the library may call
 * them. Each registration passes a fresh token as `user_data` together with
 * the static [FREE] finalizer; the library calls [FREE] when it drops that
 * `user_data` (callback replaced or companion freed), and only then is the
 * callback released. This covers the window in which a replaced callback may
 * still be running on the library's thread after the setter returned.
 */
internal object CallbackRegistry {
    private val nextToken = AtomicLong(1)
    private val retained = ConcurrentHashMap<Long, Callback>()

    /** The `qc_free_fn` given with every callback; static, so never collected. */
    @JvmField
    val FREE: QcNative.FreeFn = object : QcNative.FreeFn {
        override fun invoke(userData: Pointer?) {
            try {
                if (userData != null) retained.remove(Pointer.nativeValue(userData))
            } catch (t: Throwable) {
                // Never unwind into native code.
            }
        }
    }

    init {
        // The finalizer runs on whichever thread drops the last reference;
        // it is rare, so a thread attached only for it is detached again.
        Native.setCallbackThreadInitializer(FREE, CallbackThreadInitializer(true, true, "qc-free"))
    }

    /** Pins [cb] and returns the `user_data` token to register it with. */
    fun retain(cb: Callback): Pointer {
        val token = nextToken.getAndIncrement()
        retained[token] = cb
        return Pointer(token)
    }

    /** Unpins a token whose registration failed (the library never took it). */
    fun release(token: Pointer) {
        retained.remove(Pointer.nativeValue(token))
    }

    /** How many callbacks are pinned (for tests and diagnostics). */
    val size: Int get() = retained.size
}

/** UTF-8 helpers for the C boundary. */
internal object CStrings {
    /** `s` as NUL-terminated UTF-8; refuses embedded NULs (C would cut the string there). */
    fun arg(s: String, function: String, what: String): ByteArray {
        if (s.indexOf('\u0000') >= 0) {
            throw QwenCompanionException.Call(function, QcStatus.INVALID_ARGUMENT.code, "$what contains a NUL character")
        }
        return terminated(s)
    }

    /** `s` as UTF-8 plus a trailing NUL; the length to pass is `size - 1`. */
    fun terminated(s: String): ByteArray {
        val b = s.toByteArray(StandardCharsets.UTF_8)
        return b.copyOf(b.size + 1)
    }

    /** `len` bytes of UTF-8 at `p` (may contain NULs). */
    fun read(p: Pointer?, len: Long): String {
        if (p == null || len <= 0L) return ""
        if (len > Int.MAX_VALUE - 8) throw IllegalArgumentException("text of $len bytes is too large")
        return String(p.getByteArray(0, len.toInt()), StandardCharsets.UTF_8)
    }

    /** A NUL-terminated UTF-8 string at `p` (NULL gives `null`). */
    fun readZ(p: Pointer?): String? = p?.getString(0, QwenCompanionLibrary.UTF8)
}
