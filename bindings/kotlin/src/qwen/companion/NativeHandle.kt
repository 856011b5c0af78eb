package qwen.companion

import com.sun.jna.Callback
import com.sun.jna.CallbackThreadInitializer
import com.sun.jna.Native
import com.sun.jna.Pointer
import com.sun.jna.ptr.PointerByReference
import java.lang.ref.Cleaner
import java.lang.ref.WeakReference
import java.util.concurrent.ConcurrentHashMap

/**
 * What [QwenCompanion] and [QwenParticipant] share: one native handle
 * (`qc_companion *`, `qc_participant *`) and everything around it.
 *
 * - Lifetime: created with `qc_<kind>_new`; guarded by a [HandleGuard] (never
 *   freed under a running call, [close] idempotent), with a `Cleaner` as the
 *   backstop for an [owner] that is collected without `close()`.
 * - Calls: [call] and [outString] borrow the handle and turn the status and
 *   `char **error` into [QwenCompanionException.Call].
 * - Callbacks: [register] pins a callback in [CallbackRegistry] until the
 *   library's `qc_free_fn` finalizer runs, and holds the current one per
 *   setter until the handle is freed; each is attached to the JVM once as a
 *   daemon thread named `qc-cb`.
 * - The log handler ([setLogHandler]), which also gets the failures the
 *   other handlers report through [reporter].
 *
 * It holds no reference to [owner] (only the `Cleaner` does, weakly), so the
 * owner can be collected while the native object lives. The user's handlers
 * are held strongly only here ([hold]; reachable through the owner alone):
 * the pinned adapters, which the process-wide [CallbackRegistry] keeps for
 * the library, see them through weak references. So a handler that captures
 * its own companion does not keep it reachable for ever: an owner dropped
 * without `close()` is collected and freed by the `Cleaner` (until then a
 * callback whose handler is gone answers as a failure).
 */
internal class NativeHandle(
    owner: Any,
    /** The owner's name in messages, e.g. `QwenCompanion`. */
    private val what: String,
    val library: QwenCompanionLibrary,
    newFunction: String,
    configJson: String?,
    create: (QcNative, ByteArray?, PointerByReference, PointerByReference?) -> Int,
    free: (QcNative, Pointer?) -> Int
) {
    private val n: QcNative = library.native

    /** The callbacks currently registered, by setter, held for the handle's life. */
    private val pinned = ConcurrentHashMap<String, Callback>()

    /** Where handler failures go (the current log handler). */
    val reporter = Reporter()

    /** The user's handlers, by setter (strong; this object is reachable only through the owner). */
    private val handlers = ConcurrentHashMap<String, Any>()

    /**
     * Holds [handler] for setter [key] (null drops it) and returns a supplier
     * that reaches it only weakly: give the supplier, not the handler, to an
     * adapter that gets pinned.
     */
    fun <H : Any> hold(key: String, handler: H?): () -> H? {
        if (handler == null) {
            handlers.remove(key)
            return { null }
        }
        handlers[key] = handler
        return weakSupplier(handler)
    }

    private val guard: HandleGuard
    private val cleanable: Cleaner.Cleanable

    init {
        val out = PointerByReference()
        val err = PointerByReference()
        val status = create(n, if (configJson == null) null else CStrings.terminated(configJson), out, err)
        library.check(newFunction, status, err)
        val handle = out.value ?: throw QwenCompanionException.Call(newFunction, QcStatus.INTERNAL.code, "no handle returned")
        val native = n
        val held = pinned
        guard = HandleGuard(what, handle) { h ->
            free(native, h)
            // The library has dropped every user_data by now (finalizers ran);
            // the callbacks may go.
            held.clear()
        }
        cleanable = CLEANER.register(owner, guard)
    }

    /** True after [close]. */
    val isClosed: Boolean get() = guard.isClosed

    /** Runs [block] with the handle and a `char **error`, throws on a failed status, then returns [result]. */
    fun <T> call(function: String, block: (Pointer, PointerByReference) -> Int, result: () -> T): T =
        guard.use { h ->
            val err = PointerByReference()
            library.check(function, block(h, err), err)
            result()
        }

    fun call(function: String, block: (Pointer, PointerByReference) -> Int) {
        call(function, block) { Unit }
    }

    /** A call with a `char **out` before the `char **error`; returns `out` (freed here; NULL gives ""). */
    fun outString(function: String, f: (Pointer, PointerByReference, PointerByReference) -> Int): String {
        val out = PointerByReference()
        return call(function, { h, err -> f(h, out, err) }) {
            library.takeString(out.value) ?: ""
        }
    }

    /**
     * Sets (or with a null [cb] removes) a callback with the setter
     * [function] (`qc_<kind>_set_<x>_callback(handle, cb, user_data, free, error)`).
     */
    fun <T : Callback> register(
        function: String,
        cb: T?,
        set: (QcNative, Pointer?, T?, Pointer?, QcNative.FreeFn?, PointerByReference?) -> Int
    ) {
        pin(function, cb) { h, token, fin, err -> set(n, h, cb, token, fin, err) }
    }

    /**
     * Sets (null removes) the handler of the library's log lines up to
     * [maxLevel] with the setter [function]; it also receives the failures
     * reported through [reporter]. Exceptions from [handler] are swallowed.
     */
    fun setLogHandler(
        function: String,
        handler: ((LogLevel, String) -> Unit)?,
        maxLevel: LogLevel,
        set: (QcNative, Pointer?, QcNative.LogFn?, Pointer?, QcNative.FreeFn?, Int, PointerByReference?) -> Int
    ) {
        val get = hold("log\u0000$function", handler)
        val cb: QcNative.LogFn? = if (handler == null) null else LogAdapter(get)
        pin(function, cb) { h, token, fin, err -> set(n, h, cb, token, fin, maxLevel.code, err) }
        reporter.log = get
    }

    /** Runs [block] with the handle borrowed (never freed under it); [QwenCompanionException.Closed] after [close]. */
    fun <T> borrow(block: (Pointer) -> T): T = guard.use(block)

    /**
     * [register] for setters keyed by a name (`qc_plugin_host_set_capability_callback(h,
     * name, cb, …)`): the current callback is held per `function` + [key].
     */
    fun <T : Callback> registerKeyed(
        function: String,
        key: String,
        cb: T?,
        set: (Pointer, T?, Pointer?, QcNative.FreeFn?, PointerByReference) -> Int
    ) {
        pin("$function\u0000$key", cb) { h, token, fin, err -> set(h, cb, token, fin, err) }
    }

    /**
     * Pins a one-shot callback (e.g. a `_call_async` completion) until the
     * library's finalizer runs; returns its `user_data` token. When the
     * library refuses the call, [CallbackRegistry.release] the token.
     */
    fun retainOneShot(cb: Callback): Pointer {
        Native.setCallbackThreadInitializer(cb, CALLBACK_THREAD)
        return CallbackRegistry.retain(cb)
    }

    private fun pin(
        function: String,
        cb: Callback?,
        set: (Pointer, Pointer?, QcNative.FreeFn?, PointerByReference) -> Int
    ) {
        val token = if (cb == null) null else {
            Native.setCallbackThreadInitializer(cb, CALLBACK_THREAD)
            CallbackRegistry.retain(cb)
        }
        try {
            call(function.substringBefore('\u0000')) { h, err -> set(h, token, if (cb == null) null else CallbackRegistry.FREE, err) }
        } catch (t: Throwable) {
            if (token != null) CallbackRegistry.release(token)
            throw t
        }
        if (cb == null) pinned.remove(function) else pinned[function] = cb
    }

    /**
     * Drops the owner's reference: the handle is freed now, or when the last
     * call still running on another thread returns. [finish], when given,
     * runs first with the handle (unless already closed). Idempotent.
     */
    fun close(finish: ((Pointer) -> Unit)? = null) {
        if (finish != null && !guard.isClosed) {
            try {
                guard.use(finish)
            } catch (e: QwenCompanionException.Closed) {
                // closed meanwhile by another thread
            }
        }
        cleanable.clean()
    }

    /** `What(state)`: "closed" once closed (or when [state] finds it closed), else [state]. */
    fun describeAs(state: () -> String): String {
        val s = try {
            if (isClosed) "closed" else state()
        } catch (e: QwenCompanionException) {
            "closed"
        }
        return "$what($s)"
    }

    /**
     * Where handler failures go: the current log handler. A separate object,
     * so the adapters (pinned by the process-wide registry until their
     * finalizer runs) never keep the owner itself reachable.
     */
    class Reporter {
        /** The log handler, reached weakly (see [hold]). */
        @Volatile var log: () -> ((LogLevel, String) -> Unit)? = { null }

        fun failed(what: String, t: Throwable) {
            try {
                log()?.invoke(LogLevel.ERROR, "exception in the $what handler: ${describe(t)}")
            } catch (e: Throwable) {
                // nowhere left to report; never unwind into native code
            }
        }
    }

    private class LogAdapter(val handler: () -> ((LogLevel, String) -> Unit)?) : QcNative.LogFn {
        override fun invoke(userData: Pointer?, level: Int, message: Pointer?) {
            try {
                handler()?.invoke(LogLevel.fromCode(level), CStrings.readZ(message) ?: "")
            } catch (t: Throwable) {
                // A log handler has no way to report failure; never unwind into native code.
            }
        }
    }

    companion object {
        private val CLEANER: Cleaner = Cleaner.create()

        /**
         * Callbacks run on the library's single callback thread; attach it to
         * the JVM once (as a daemon named `qc-cb`) instead of attaching and
         * detaching on every call.
         */
        private val CALLBACK_THREAD = CallbackThreadInitializer(true, false, "qc-cb")

        /** A supplier that reaches [value] weakly (a static function: the lambda captures nothing else). */
        fun <H : Any> weakSupplier(value: H): () -> H? {
            val ref = WeakReference(value)
            return { ref.get() }
        }

        /** Message of the failure a callback gives when its owner was collected without `close()`. */
        const val GONE = "the handler is gone (its object was garbage-collected without close())"

        /** Best-effort text of a throwable for a reply or a log line (never throws). */
        fun describe(t: Throwable): String = try {
            val m = t.message
            if (m.isNullOrBlank()) t.javaClass.name else "${t.javaClass.simpleName}: $m"
        } catch (e: Throwable) {
            "exception"
        }
    }
}
