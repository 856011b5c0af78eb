package qwen.companion.intellij.core.sessions

import qwen.companion.QcPlatform
import java.io.File

/** The participant's name: `intellij-<project>`, sanitised so it is a plain, unambiguous address. */
object ParticipantName {
    /** Longest name the registry keeps whole (39 characters + `…` otherwise). */
    const val MAX = 39

    /**
     * [override] (the user's setting) when not blank, else `intellij-` +
     * [projectName]; lower-cased, every run of characters outside
     * `a-z 0-9 . _ -` made one `-`, no `-` at either end, at most [MAX]
     * characters. `intellij` when nothing is left.
     */
    fun derive(projectName: String?, override: String? = null): String {
        val o = override?.trim()
        val raw = if (o != null && o.isNotEmpty()) o else "intellij-" + (projectName ?: "")
        val s = sanitize(raw)
        return if (s.isEmpty()) "intellij" else s
    }

    fun sanitize(raw: String): String {
        val sb = StringBuilder()
        var dash = false
        for (c in raw.toLowerCase()) {
            val ok = c in 'a'..'z' || c in '0'..'9' || c == '.' || c == '_' || c == '-'
            if (ok && c != '-') {
                sb.append(c)
                dash = false
            } else if (!dash) {
                sb.append('-')
                dash = true
            }
        }
        var s = sb.toString().trim('-')
        if (s.length > MAX) s = s.substring(0, MAX).trimEnd('-')
        return s
    }
}

/** A `path:line` (or `path:line:column`) a message names. */
data class PathLine(val path: String, val line: Int, val column: Int?) {
    /** `path:line[:column]`. */
    override fun toString(): String = "$path:$line" + if (column != null) ":$column" else ""

    companion object {
        // A path (absolute, ./, ../, ~/ or relative with a slash or an extension; on Windows also
        // with backslashes and a drive, C:\src\a.kt) then :line[:col].
        private val RE = Regex("""(?<![\w/\\.~-])((?:[A-Za-z]:[\\/])?(?:~|\.{1,2})?[\\/]?[\w.@+-]+(?:[\\/][\w.@+-]+)*):(\d{1,7})(?::(\d{1,5}))?(?![\w:])""")

        /**
         * Every `path:line[:column]` in [text], in order, without repeats.
         * Relative paths are resolved against [baseDir] when given; `~/` against
         * [home]. A bare word without `/` or `.` (`localhost:8080`) is not a path;
         * nor is a URL (`http://host:80`).
         */
        fun findAll(
            text: String,
            baseDir: String? = null,
            home: String? = System.getProperty("user.home"),
            os: QcPlatform.Os = QcPlatform.current()
        ): List<PathLine> {
            val out = LinkedHashSet<PathLine>()
            for (m in RE.findAll(text)) {
                val p = m.groupValues[1]
                val start = m.range.first
                if (start >= 2 && text.regionMatches(start - 2, ":/", 0, 2)) continue
                if (start >= 1 && text[start - 1] == ':') continue
                val name = p.substringAfterLast('/').substringAfterLast('\\')
                if (!p.contains('/') && !p.contains('\\') && !name.contains('.')) continue
                if (name.isEmpty() || name == "." || name == "..") continue
                val line = m.groupValues[2].toInt()
                if (line < 1) continue
                val col = m.groupValues[3].takeIf { it.isNotEmpty() }?.toInt()?.takeIf { it >= 1 }
                out.add(PathLine(resolve(p, baseDir, home, os), line, col))
            }
            return ArrayList(out)
        }

        fun resolve(p: String, baseDir: String?, home: String?, os: QcPlatform.Os = QcPlatform.current()): String = when {
            (p.startsWith("~/") || (os == QcPlatform.Os.WINDOWS && p.startsWith("~\\"))) && home != null -> File(home, p.substring(2)).path
            isAbsolute(p, os) -> if (os == QcPlatform.current()) File(p).normalize().path else p
            baseDir != null -> File(baseDir, p).normalize().path
            else -> p
        }

        /** `/x`, and on Windows `C:\x`, `C:/x` and `\\server\share`. */
        fun isAbsolute(p: String, os: QcPlatform.Os = QcPlatform.current()): Boolean =
            p.startsWith("/") || (os == QcPlatform.Os.WINDOWS && (WINDOWS_ABSOLUTE.containsMatchIn(p) || p.startsWith("\\\\")))

        private val WINDOWS_ABSOLUTE = Regex("""^[A-Za-z]:[\\/]""")
    }
}

/** The text the editor sends to a session. */
object OutgoingText {
    /** Longest text sent (the peer's frame limit leaves room for the envelope). */
    const val MAX_CHARS = 60000

    /**
     * The selection of [path] (lines [startLine]..[endLine], 1-based) as a
     * message: an optional note, then `path:start-end` and the text in a
     * fenced block (the fence longer than any backtick run inside).
     */
    fun selectionWithContext(path: String, startLine: Int, endLine: Int, text: String, note: String? = null): String {
        val range = if (endLine > startLine) "$startLine-$endLine" else "$startLine"
        val fence = fenceFor(text)
        val lang = language(path)
        val sb = StringBuilder()
        if (note != null && note.isNotBlank()) sb.append(note.trim()).append("\n\n")
        sb.append(path).append(':').append(range).append('\n')
        sb.append(fence).append(lang).append('\n').append(text)
        if (!text.endsWith("\n")) sb.append('\n')
        sb.append(fence)
        return cap(sb.toString())
    }

    /** The last run's output as a message: a header naming the run, the output fenced. */
    fun consoleOutput(runName: String, output: String, truncated: Boolean): String {
        val fence = fenceFor(output)
        val head = "Output of the last run \"$runName\"" + (if (truncated) " (last ${output.length} characters)" else "") + ":\n"
        return cap(head + fence + "\n" + output + (if (output.endsWith("\n")) "" else "\n") + fence)
    }

    /** [text] cut to [MAX_CHARS] (keeping the start; never splitting a surrogate pair). */
    fun cap(text: String): String {
        if (text.length <= MAX_CHARS) return text
        var end = MAX_CHARS - 1
        if (Character.isHighSurrogate(text[end - 1])) end--
        return text.substring(0, end) + "…"
    }

    fun fenceFor(text: String): String {
        var longest = 0
        var run = 0
        for (c in text) {
            if (c == '`') {
                run++
                if (run > longest) longest = run
            } else run = 0
        }
        return "`".repeat(Math.max(3, longest + 1))
    }

    private fun language(path: String): String {
        val ext = path.substringAfterLast('.', "").toLowerCase()
        return when (ext) {
            "kt", "kts" -> "kotlin"
            "java" -> "java"
            "py" -> "python"
            "js", "mjs", "cjs" -> "javascript"
            "ts", "tsx" -> "typescript"
            "rs" -> "rust"
            "go" -> "go"
            "c", "h" -> "c"
            "cpp", "cc", "hpp" -> "cpp"
            "md" -> "markdown"
            "json" -> "json"
            "sh" -> "sh"
            else -> ""
        }
    }
}

/**
 * The output of the last run (the IDE's run console): the newest process
 * started replaces the previous one; at most [maxChars] characters are kept
 * (the tail). Thread-safe: processes write from their own threads.
 */
class ConsoleCapture(private val maxChars: Int = 32000) {
    private val lock = Any()
    private var name: String? = null
    private var generation = 0L
    private val buf = StringBuilder()
    private var dropped = false

    /** A new run started: returns its token for [append]. */
    fun started(runName: String): Long = synchronized(lock) {
        name = runName
        buf.setLength(0)
        dropped = false
        ++generation
    }

    /** Text of run [token]; text of an older run is ignored. */
    fun append(token: Long, text: String) {
        synchronized(lock) {
            if (token != generation) return
            buf.append(text)
            if (buf.length > maxChars) {
                var cut = buf.length - maxChars
                if (cut < buf.length && Character.isLowSurrogate(buf[cut])) cut++
                buf.delete(0, cut)
                dropped = true
            }
        }
    }

    /** `(run name, output, truncated)` of the last run, or null when nothing ran or it printed nothing. */
    fun last(): Triple<String, String, Boolean>? = synchronized(lock) {
        val n = name ?: return null
        if (buf.isEmpty()) return null
        Triple(n, buf.toString(), dropped)
    }
}
