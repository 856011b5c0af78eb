package qwen.companion

import com.sun.jna.Pointer
import java.util.concurrent.atomic.AtomicBoolean
import java.util.concurrent.atomic.AtomicLong

/**
 * Lifetime of one native handle, after uniffi's generated Kotlin objects: an
 * in-flight counter that starts at 1 (the owner's reference) plus a closed
 * flag. Every call borrows the handle with [use]; [destroy] drops the owner's
 * reference once; whoever brings the counter to 0 — `destroy` itself, or the
 * last call still running on another thread — runs [free]. So the native
 * handle is never freed under a running call, and `close()` is idempotent.
 *
 * It is also the `Runnable` given to the JVM's `Cleaner` as a backstop for
 * objects that were never closed; it holds no reference to the Kotlin object
 * that owns it.
 *
 * Reusable for every handle type the library will grow (inbox, plugin host).
 */
internal class HandleGuard(
    private val what: String,
    private val handle: Pointer,
    private val free: (Pointer) -> Unit
) : Runnable {
    private val calls = AtomicLong(1)
    private val closed = AtomicBoolean(false)

    /** True once [destroy] ran (the native object may still live until in-flight calls end). */
    val isClosed: Boolean get() = closed.get()

    /** Runs [block] with the handle, holding a reference for its duration. */
    fun <T> use(block: (Pointer) -> T): T {
        if (closed.get()) throw QwenCompanionException.Closed(what)
        while (true) {
            val n = calls.get()
            if (n == 0L) throw QwenCompanionException.Closed(what)
            if (n == Long.MAX_VALUE) throw IllegalStateException("$what: call counter overflow")
            if (calls.compareAndSet(n, n + 1)) break
        }
        try {
            return block(handle)
        } finally {
            if (calls.decrementAndGet() == 0L) free(handle)
        }
    }

    /** Drops the owner's reference (once); returns true on the first call. */
    fun destroy(): Boolean {
        if (!closed.compareAndSet(false, true)) return false
        if (calls.decrementAndGet() == 0L) free(handle)
        return true
    }

    override fun run() {
        destroy()
    }
}
