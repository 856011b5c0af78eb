package qwen.companion.intellij.core

import qwen.companion.OpenDiffResult
import qwen.companion.QwenCompanion
import qwen.companion.QwenCompanionException
import java.util.concurrent.atomic.AtomicLong

/** Where the user's decisions go (a [QwenCompanion], or a fake in tests). */
interface DiffDecisionSink {
    /** `content` null = the proposed text unchanged. */
    fun diffAccept(path: String, content: String?)
    fun diffReject(path: String)
    fun diffClosed(path: String)
}

/** A [DiffDecisionSink] that forwards to a companion. */
class CompanionDecisionSink(private val companion: () -> QwenCompanion?) : DiffDecisionSink {
    override fun diffAccept(path: String, content: String?) { companion()?.diffAccept(path, content) }
    override fun diffReject(path: String) { companion()?.diffReject(path) }
    override fun diffClosed(path: String) { companion()?.diffClosed(path) }
}

/**
 * Shows diff views (IntelliJ's DiffManager in the plugin). Methods may be
 * called from any thread; the implementation moves to the UI thread itself.
 */
interface DiffPresenter {
    /** Shows [session] and returns once it is visible; throws to refuse. */
    fun show(session: DiffSession)
    /** The current (maybe user-edited) proposed text of [session]'s view, or null if it has none. */
    fun currentText(session: DiffSession): String?
    /** Closes [session]'s view without deciding anything. Idempotent. */
    fun close(session: DiffSession)

    /**
     * The companion is about to be freed: stop waiting for the UI in [show]
     * (freeing joins the callback thread that may be blocked there, and it is
     * usually freed from the UI thread).
     */
    fun dispose() {}
}

/**
 * Line separators. IntelliJ's documents (the diff's editable side included)
 * always hold `\n`; the file on disk may use `\r\n` (or `\r`), and Qwen
 * Code writes what the IDE accepts byte for byte, so the accepted text gets
 * the file's separator back.
 */
object LineSeparators {
    /** The separator of the first line break of [text] (`"\r\n"`, `"\r"`, `"\n"`), or null when it has none. */
    fun detect(text: CharSequence?): String? {
        if (text == null) return null
        for (i in 0 until text.length) {
            val c = text[i]
            if (c == '\n') return "\n"
            if (c == '\r') return if (i + 1 < text.length && text[i + 1] == '\n') "\r\n" else "\r"
        }
        return null
    }

    /** What an IntelliJ document makes of [text]: every separator as `\n`. */
    fun toLf(text: String): String =
        if (text.indexOf('\r') < 0) text else text.replace("\r\n", "\n").replace('\r', '\n')

    /** [lfText] (a document's text) with [separator] instead of `\n`. */
    fun fromLf(lfText: CharSequence, separator: String): String =
        if (separator == "\n") lfText.toString() else lfText.toString().replace("\n", separator)
}

/** States of one diff. Only [SHOWING] can change, and only once. */
enum class DiffState {
    /** The view is up and waiting for the user. */
    SHOWING,
    /** The user accepted: `ide/diffAccepted` sent. */
    ACCEPTED,
    /** The user rejected: `ide/diffRejected` sent. */
    REJECTED,
    /** The user closed the view without deciding: `ide/diffClosed` sent. */
    CLOSED_BY_USER,
    /** The CLI closed it (`closeDiff`); the library answers the CLI itself. */
    CLOSED_BY_CLI,
    /** Another `openDiff` for the same path replaced it (the library did too). */
    SUPERSEDED,
    /** Closed by the IDE (project closing, view could not be shown). */
    DISPOSED
}

/** One diff shown to the user; the view reports the user's actions here. */
class DiffSession internal constructor(
    val id: Long,
    /** Absolute path of the file. */
    val path: String,
    /** The file's text when the diff was opened (null for a new file). */
    val originalText: String?,
    /** The text the CLI proposes. */
    val proposedText: String,
    private val controller: DiffController,
    /** Which CLI proposed it (`CLI #2`), only while more than one is connected; else null. */
    val proposer: String? = null
) {
    /** The diff's title: `Qwen Code: app.py`, with ` (CLI #2)` when [proposer] is known. */
    val title: String get() = "Qwen Code: " + java.io.File(path).name + (if (proposer != null) " ($proposer)" else "")

    @Volatile
    var state: DiffState = DiffState.SHOWING
        internal set

    val isOpen: Boolean get() = state == DiffState.SHOWING

    /** The separator the accepted text gets: the file's, else the proposal's, else `\n`. */
    val lineSeparator: String = LineSeparators.detect(originalText) ?: LineSeparators.detect(proposedText) ?: "\n"

    /**
     * The text to report for a view showing [viewText] (a document's text,
     * `\n` only): null when it is the proposal unchanged, else [viewText]
     * with [lineSeparator].
     */
    fun finalTextOf(viewText: CharSequence): String? {
        val lf = LineSeparators.toLf(proposedText)
        if (lf.contentEquals(viewText)) return null
        return LineSeparators.fromLf(viewText, lineSeparator)
    }

    /** The user accepted, with the view's final text (null = as proposed). */
    fun accept(finalText: String?) = controller.accept(this, finalText)

    /**
     * The user accepted the view showing [viewText] (an IntelliJ document's
     * text): an unchanged proposal is accepted without an edit, an edited
     * one with the file's line separator.
     */
    fun acceptView(viewText: CharSequence) = controller.accept(this, finalTextOf(viewText))

    fun reject() = controller.reject(this)

    /** The view was closed; counts as "closed without deciding" only while [isOpen]. */
    fun viewClosed() = controller.viewClosed(this)

    override fun toString(): String = "DiffSession#$id($path, $state)"
}

/**
 * The diff state machine between the library and the IDE's diff views:
 * - [onOpenDiff] / [onCloseDiff] are the companion's handlers (they run on the
 *   library's `qc-cb` thread);
 * - [DiffSession.accept] / [DiffSession.reject] / [DiffSession.viewClosed]
 *   come from the view (UI thread).
 * Each session leaves [DiffState.SHOWING] exactly once, so one decision is
 * reported per diff whatever the order of clicks, window closes and CLI
 * `closeDiff` calls. No lock is held while calling the presenter or the sink.
 */
class DiffController(
    private val sink: DiffDecisionSink,
    private val presenter: DiffPresenter,
    /** Reads the file's current text (null when it does not exist). */
    private val readOriginal: (String) -> String?,
    private val log: HostLog,
    /** The label of the CLI that proposed the diff of a path, when more than one is connected (null otherwise). */
    private val proposerOf: (String) -> String? = { null }
) {
    private val lock = Any()
    private val ids = AtomicLong(1)
    private val open = LinkedHashMap<String, DiffSession>()

    /** The sessions that are showing. */
    fun openSessions(): List<DiffSession> = synchronized(lock) { ArrayList(open.values) }

    /** The showing session of [path], if any. */
    fun session(path: String): DiffSession? = synchronized(lock) { open[path] }

    /** The companion's open-diff handler. */
    fun onOpenDiff(path: String, newContent: String): OpenDiffResult {
        val original = try {
            readOriginal(path)
        } catch (e: Exception) {
            log.warn("qwen-companion: cannot read $path for the diff", e)
            null
        }
        val proposer = try {
            proposerOf(path)
        } catch (e: Exception) {
            log.warn("qwen-companion: cannot tell which CLI proposed $path", e)
            null
        } catch (e: LinkageError) {
            // A library without the report: the diff is shown without the label.
            log.warn("qwen-companion: cannot tell which CLI proposed $path", e)
            null
        }
        val session = DiffSession(ids.getAndIncrement(), path, original, newContent, this, proposer)
        val previous = synchronized(lock) {
            val p = open.put(path, session)
            if (p != null && p.state == DiffState.SHOWING) p.state = DiffState.SUPERSEDED
            p
        }
        if (previous != null) closeView(previous)
        return try {
            presenter.show(session)
            OpenDiffResult.Shown
        } catch (t: Throwable) {
            synchronized(lock) {
                if (open[path] === session) open.remove(path)
                session.state = DiffState.DISPOSED
            }
            closeView(session)
            log.warn("qwen-companion: cannot show the diff of $path", t)
            OpenDiffResult.Refused("the IDE could not show the diff: ${t.message ?: t.javaClass.simpleName}")
        }
    }

    /** The companion's close-diff handler: closes the view, returns its final text. */
    fun onCloseDiff(path: String): String? {
        val session = synchronized(lock) {
            val s = open.remove(path)
            if (s != null && s.state == DiffState.SHOWING) s.state = DiffState.CLOSED_BY_CLI
            s
        } ?: return null
        val view = try {
            presenter.currentText(session)
        } catch (e: Exception) {
            log.warn("qwen-companion: cannot read the diff view of $path", e)
            null
        }
        // The view holds `\n` only: give the CLI its proposal back when unchanged, else the file's separator.
        val text = if (view == null) session.proposedText else session.finalTextOf(view) ?: session.proposedText
        closeView(session)
        return text
    }

    internal fun accept(session: DiffSession, finalText: String?) =
        decide(session, DiffState.ACCEPTED) { sink.diffAccept(session.path, finalText) }

    internal fun reject(session: DiffSession) =
        decide(session, DiffState.REJECTED) { sink.diffReject(session.path) }

    internal fun viewClosed(session: DiffSession) =
        decide(session, DiffState.CLOSED_BY_USER) { sink.diffClosed(session.path) }

    /** Moves [session] out of SHOWING into [to] and reports it; false if it was already decided. */
    private fun decide(session: DiffSession, to: DiffState, report: () -> Unit): Boolean {
        synchronized(lock) {
            if (session.state != DiffState.SHOWING) return false
            session.state = to
            if (open[session.path] === session) open.remove(session.path)
        }
        try {
            report()
        } catch (e: QwenCompanionException) {
            // e.g. NOT_FOUND: the CLI closed the diff (or disconnected) meanwhile.
            log.warn("qwen-companion: reporting $to for ${session.path} failed: ${e.message}")
        } catch (e: RuntimeException) {
            log.error("qwen-companion: reporting $to for ${session.path} failed", e)
        }
        closeView(session)
        return true
    }

    /**
     * "Close All Qwen Diffs": rejects every showing diff (each CLI gets
     * `ide/diffRejected`, nothing is written) and closes its view. Returns
     * how many were rejected.
     */
    fun rejectAll(): Int {
        var n = 0
        for (s in openSessions()) if (reject(s)) n++
        return n
    }

    /** Closes every view without reporting (the companion is going away). */
    fun closeAll() {
        val all = synchronized(lock) {
            val l = ArrayList(open.values)
            open.clear()
            for (s in l) if (s.state == DiffState.SHOWING) s.state = DiffState.DISPOSED
            l
        }
        for (s in all) closeView(s)
    }

    private fun closeView(session: DiffSession) {
        try {
            presenter.close(session)
        } catch (e: Exception) {
            log.warn("qwen-companion: closing the diff view of ${session.path} failed", e)
        }
    }
}
