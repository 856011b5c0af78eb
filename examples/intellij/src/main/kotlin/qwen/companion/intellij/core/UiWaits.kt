package qwen.companion.intellij.core

import java.util.concurrent.CompletableFuture
import java.util.concurrent.ExecutionException
import java.util.concurrent.TimeUnit
import java.util.concurrent.TimeoutException

/** The IDE is closing the project: a wait for the UI was given up. */
class UiClosingException(message: String) : IllegalStateException(message)

/**
 * Waits of the library's callback thread for work posted to the UI thread
 * (showing a diff), which the project's disposal must be able to cut short:
 * freeing the companion joins the callback thread, so a wait left running
 * would hold the disposal for its whole timeout.
 *
 * The check of [dispose] and the registration of a wait happen under one
 * lock, so a wait registered after [dispose] fails at once, and one
 * registered before is failed by it: no wait survives [dispose].
 */
class PendingWaits {
    private val lock = Any()
    private val pending = HashSet<CompletableFuture<Unit>>()
    private var disposed = false

    val isDisposed: Boolean get() = synchronized(lock) { disposed }

    /** Number of waits in progress (tests, diagnostics). */
    val size: Int get() = synchronized(lock) { pending.size }

    /**
     * Registers a wait, calls [post] with its future (complete it from the UI
     * work) and waits up to [timeoutMs]. Throws [UiClosingException] when
     * disposed before or during the wait, the UI work's own exception when
     * it failed, and [TimeoutException] when the UI did not answer in time.
     */
    fun await(timeoutMs: Long, post: (CompletableFuture<Unit>) -> Unit) {
        val f = CompletableFuture<Unit>()
        synchronized(lock) {
            if (disposed) throw UiClosingException("the project is closing")
            pending.add(f)
        }
        try {
            post(f)
            f.get(timeoutMs, TimeUnit.MILLISECONDS)
        } catch (e: ExecutionException) {
            throw e.cause ?: e
        } finally {
            synchronized(lock) { pending.remove(f) }
        }
    }

    /** Fails every wait in progress and every later one. Idempotent. */
    fun dispose() {
        val all = synchronized(lock) {
            disposed = true
            ArrayList(pending).also { pending.clear() }
        }
        for (f in all) f.completeExceptionally(UiClosingException("the project is closing"))
    }
}
