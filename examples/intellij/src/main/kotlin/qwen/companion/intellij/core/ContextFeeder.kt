package qwen.companion.intellij.core

import qwen.companion.QwenCompanion
import qwen.companion.QwenCompanionException
import java.io.File

// IDE-independent: no IntelliJ imports in this package. The platform glue
// (qwen.companion.intellij) turns editor events into calls on these classes.

/** Where editor context goes (a [QwenCompanion], or a fake in tests). */
interface ContextSink {
    fun fileOpened(path: String)
    fun fileFocused(path: String)
    fun fileClosed(path: String)
    fun fileRenamed(oldPath: String, newPath: String)
    /** 1-based [line] and [character]. */
    fun setCursor(path: String?, line: Int, character: Int)
    /** null clears the selection. */
    fun setSelection(path: String?, text: String?)
}

/** A [ContextSink] that forwards to a companion. */
class CompanionContextSink(private val companion: () -> QwenCompanion?) : ContextSink {
    override fun fileOpened(path: String) { companion()?.fileOpened(path) }
    override fun fileFocused(path: String) { companion()?.fileFocused(path) }
    override fun fileClosed(path: String) { companion()?.fileClosed(path) }
    override fun fileRenamed(oldPath: String, newPath: String) { companion()?.fileRenamed(oldPath, newPath) }
    override fun setCursor(path: String?, line: Int, character: Int) { companion()?.setCursor(path, line, character) }
    override fun setSelection(path: String?, text: String?) { companion()?.setSelection(path, text) }
}

/** Logging the core needs from its host (IntelliJ's Logger in the plugin). */
interface HostLog {
    fun info(message: String)
    fun warn(message: String, error: Throwable? = null)
    fun error(message: String, error: Throwable? = null)
}

/** Text-position helpers: the companion wants 1-based line and character (UTF-16 units). */
object TextPositions {
    /** A 1-based cursor position. */
    data class Cursor(val line: Int, val character: Int)

    /**
     * The cursor for a caret at [offset] on 0-based line [lineIndex] that
     * starts at [lineStartOffset] (what an editor's document model gives).
     * Columns count characters, not visual columns, so tabs count as one.
     */
    fun fromOffsets(lineIndex: Int, lineStartOffset: Int, offset: Int): Cursor {
        require(lineIndex >= 0 && lineStartOffset >= 0 && offset >= lineStartOffset) {
            "bad position: line $lineIndex, line start $lineStartOffset, offset $offset"
        }
        return Cursor(lineIndex + 1, offset - lineStartOffset + 1)
    }

    /** The cursor for [offset] in [text] (lines end at '\n'; a "\r\n" counts its '\r' on the line). */
    fun fromText(text: CharSequence, offset: Int): Cursor {
        require(offset >= 0 && offset <= text.length) { "offset $offset outside 0..${text.length}" }
        var line = 0
        var lineStart = 0
        for (i in 0 until offset) {
            if (text[i] == '\n') {
                line++
                lineStart = i + 1
            }
        }
        return fromOffsets(line, lineStart, offset)
    }
}

/** Selection text handling. */
object SelectionText {
    /** The CLI keeps at most this many UTF-16 units of selected text. */
    const val LIMIT = 16384

    /**
     * Cuts a huge selection before it crosses the C boundary (a select-all in
     * a 50 MB file should not copy 50 MB on every caret move). The result
     * stays over [LIMIT] when the input was, so the library still cuts it
     * and adds its `... [TRUNCATED]` marker; a surrogate pair is never split.
     */
    fun cap(text: String): String {
        if (text.length <= LIMIT + 1) return text
        var end = LIMIT + 2
        if (Character.isHighSurrogate(text[end - 1])) end--
        return text.substring(0, end)
    }

    /**
     * The selection [start]..[end] of a document's [chars] (an immutable
     * snapshot such as `Document.getImmutableCharSequence()`), cut like [cap]
     * WITHOUT copying the whole selection first: only the first
     * `LIMIT + 2` characters are read. Null for an empty selection.
     */
    fun capFrom(chars: CharSequence, start: Int, end: Int): String? {
        require(start >= 0 && start <= end && end <= chars.length) { "bad selection $start..$end of ${chars.length}" }
        if (start == end) return null
        var stop = end
        if (end - start > LIMIT + 1) {
            stop = start + LIMIT + 2
            if (Character.isHighSurrogate(chars[stop - 1])) stop--
        }
        val sb = StringBuilder(stop - start)
        sb.append(chars, start, stop)
        return sb.toString()
    }
}

/**
 * Turns editor events into companion calls: filters paths that are not local
 * files, converts 0-based editor positions to the companion's 1-based ones,
 * drops repeats, follows renames of files and folders, and never lets a
 * library error escape into an IDE listener (they are logged).
 */
class EditorContextFeeder(private val sink: ContextSink, private val log: HostLog) {
    private val lock = Any()
    private val tracked = LinkedHashSet<String>()
    private var focused: String? = null
    private val lastCursor = HashMap<String, TextPositions.Cursor>()
    private val lastSelection = HashMap<String, String>()

    /** Paths the companion can use: absolute local paths (the glue passes null for jar:, remote, etc.). */
    fun isTrackable(path: String?): Boolean =
        path != null && path.length > 0 && path.indexOf('\u0000') < 0 && File(path).isAbsolute

    private fun safely(what: String, f: () -> Unit) {
        try {
            f()
        } catch (e: QwenCompanionException) {
            log.warn("qwen-companion: $what failed: ${e.message}")
        } catch (e: RuntimeException) {
            log.error("qwen-companion: $what failed", e)
        }
    }

    /** Paths of files the feeder knows are open (diagnostics, tests). */
    fun trackedPaths(): List<String> = synchronized(lock) { ArrayList(tracked) }

    fun fileOpened(path: String?) {
        if (!isTrackable(path)) return
        val p = path!!
        synchronized(lock) { tracked.add(p) }
        safely("fileOpened") { sink.fileOpened(p) }
    }

    /** The editor tab of [path] got the focus. */
    fun fileFocused(path: String?) {
        if (!isTrackable(path)) return
        val p = path!!
        synchronized(lock) {
            tracked.add(p)
            if (focused == p) return
            focused = p
            // A newly focused file starts without cursor/selection in the companion.
            lastCursor.remove(p)
            lastSelection.remove(p)
        }
        safely("fileFocused") { sink.fileFocused(p) }
    }

    fun fileClosed(path: String?) {
        if (!isTrackable(path)) return
        val p = path!!
        synchronized(lock) {
            tracked.remove(p)
            lastCursor.remove(p)
            lastSelection.remove(p)
            if (focused == p) focused = null
        }
        safely("fileClosed") { sink.fileClosed(p) }
    }

    /** A deleted file is a closed one; a deleted folder closes every tracked file below it. */
    fun fileDeleted(path: String?) {
        if (!isTrackable(path)) return
        val p = path!!.trimEnd('/')
        val below = synchronized(lock) { tracked.filter { it == p || it.startsWith("$p/") } }
        if (below.isEmpty()) fileClosed(p) else for (f in below) fileClosed(f)
    }

    /** The caret of [path] moved to 0-based [line0]/[column0] (characters, not visual columns). */
    fun caretMoved(path: String?, line0: Int, column0: Int) {
        if (!isTrackable(path) || line0 < 0 || column0 < 0) return
        val p = path!!
        val cursor = TextPositions.Cursor(line0 + 1, column0 + 1)
        synchronized(lock) {
            if (lastCursor[p] == cursor && focused == p) return
            lastCursor[p] = cursor
            tracked.add(p)
            focused = p // a cursor in another file moves the focus there (library rule too)
        }
        safely("setCursor") { sink.setCursor(p, cursor.line, cursor.character) }
    }

    /** The selection of [path] changed; null or empty clears it. */
    fun selectionChanged(path: String?, text: String?) {
        if (!isTrackable(path)) return
        val p = path!!
        val t = if (text == null || text.length == 0) null else SelectionText.cap(text)
        synchronized(lock) {
            if (lastSelection[p] == t && focused == p) return
            if (t == null) lastSelection.remove(p) else lastSelection[p] = t
            tracked.add(p)
            focused = p
        }
        safely("setSelection") { sink.setSelection(p, t) }
    }

    /**
     * [oldPath] was renamed or moved to [newPath]. For a folder
     * ([isDirectory]), every tracked file below it is renamed.
     */
    fun fileRenamed(oldPath: String?, newPath: String?, isDirectory: Boolean = false) {
        if (!isTrackable(oldPath) || !isTrackable(newPath)) return
        val old = oldPath!!.trimEnd('/')
        val new = newPath!!.trimEnd('/')
        val moves = ArrayList<Pair<String, String>>()
        synchronized(lock) {
            if (isDirectory) {
                for (p in tracked) if (p.startsWith("$old/")) moves.add(Pair(p, new + p.substring(old.length)))
            } else if (tracked.contains(old)) {
                moves.add(Pair(old, new))
            }
            for ((from, to) in moves) {
                tracked.remove(from)
                tracked.add(to)
                lastCursor.remove(from)?.let { lastCursor[to] = it }
                lastSelection.remove(from)?.let { lastSelection[to] = it }
                if (focused == from) focused = to
            }
        }
        for ((from, to) in moves) safely("fileRenamed") { sink.fileRenamed(from, to) }
    }
}
