package qwen.companion.intellij.core

import qwen.companion.QcPlatform

/**
 * The text "Add File / Add Selection to Qwen Prompt" types into the `qwen`
 * terminal: a reference in the syntax Qwen Code 0.24.4 reads from its prompt
 * (`@path`), the lines as plain words after it, and a trailing space; never
 * a line break (the user presses Enter).
 *
 * - The path is relative to the folder `qwen` runs in (its workspace root)
 *   when the file is inside it, else absolute.
 * - Qwen Code ends a reference at whitespace or one of `, ; ! ? ( ) [ ] { }`,
 *   so on Linux and macOS each character of [POSIX_SPECIAL] gets a backslash
 *   (Qwen Code removes it again). On Windows it removes none: a path holding
 *   one of them cannot be referenced, and the user is told so instead.
 * - Qwen Code 0.24.4 has no line-range syntax (`@a.py#L3` is "not found"), so
 *   a range is typed as words: `@src/app.py (lines 10-20) `; the model gets
 *   the whole file and the words telling it which lines.
 */
object PromptReference {
    /** Characters Qwen Code's `@` reference cannot hold unescaped. */
    const val POSIX_SPECIAL = " \t()[]{};|*?\$`'\"#&<>!~,"

    /** 1-based inclusive line range. */
    data class LineRange(val start: Int, val end: Int) {
        init {
            require(start >= 1 && end >= start) { "bad line range $start-$end" }
        }

        /** `(line 3)` or `(lines 3-9)`. */
        fun words(): String = if (start == end) "(line $start)" else "(lines $start-$end)"
    }

    /** What to type, or why nothing can be typed. */
    sealed class Result {
        class Text(val text: String) : Result() {
            override fun toString(): String = "Text($text)"
        }

        class Refused(val reason: String) : Result() {
            override fun toString(): String = "Refused($reason)"
        }
    }

    /**
     * The reference to [path] (absolute) for a `qwen` running in [cwd] (null:
     * unknown, the absolute path is typed), with [range] as words, on [os].
     */
    fun build(path: String, cwd: String?, range: LineRange? = null, os: QcPlatform.Os = QcPlatform.current()): Result {
        val windows = os == QcPlatform.Os.WINDOWS
        if (path.isEmpty()) return Result.Refused("the file has no path")
        if (path.any { it < ' ' && it != '\t' || it == '\u007f' }) {
            return Result.Refused("the path of $path holds a line break or control character, which a prompt cannot carry")
        }
        val shown = relative(path, cwd, windows) ?: path
        val ref = if (windows) {
            val bad = shown.filter { POSIX_SPECIAL.indexOf(it) >= 0 }.toSet()
            if (bad.isNotEmpty()) {
                return Result.Refused(
                    "Qwen Code on Windows cannot reference $shown: its path holds " +
                        bad.sorted().joinToString(" ") { if (it == ' ') "a space" else if (it == '\t') "a tab" else "'$it'" } +
                        ", which ends an @ reference there (Qwen Code removes no backslash on Windows). Rename the file or paste its content."
                )
            }
            shown
        } else {
            escapePosix(shown)
        }
        val sb = StringBuilder("@").append(ref)
        if (range != null) sb.append(' ').append(range.words())
        sb.append(' ')
        return Result.Text(sb.toString())
    }

    /** [p] with a backslash before each character of [POSIX_SPECIAL]. */
    fun escapePosix(p: String): String {
        val sb = StringBuilder(p.length + 8)
        for (ch in p) {
            if (POSIX_SPECIAL.indexOf(ch) >= 0) sb.append('\\')
            sb.append(ch)
        }
        return sb.toString()
    }

    /**
     * [path] relative to [root] when inside it (with the OS's separator), else
     * null. Windows compares case-insensitively and takes `/` as `\`.
     */
    fun relative(path: String, root: String?, windows: Boolean): String? {
        if (root == null || root.isEmpty()) return null
        val sep = if (windows) '\\' else '/'
        val p = if (windows) path.replace('/', '\\') else path
        var r = if (windows) root.replace('/', '\\') else root
        while (r.length > 1 && r.endsWith(sep) && !(windows && r.length == 3 && r[1] == ':')) r = r.dropLast(1)
        val prefix = if (r.endsWith(sep)) r else r + sep
        val inside = if (windows) p.regionMatches(0, prefix, 0, prefix.length, ignoreCase = true) else p.startsWith(prefix)
        if (!inside || p.length == prefix.length) return null
        return p.substring(prefix.length)
    }

    /**
     * The lines a selection covers, from 1-based [startLine], [endLine] and
     * the 1-based [endColumn] of its end: a selection ending at the start of
     * a line (whole lines selected) does not take that line.
     */
    fun selectionLines(startLine: Int, endLine: Int, endColumn: Int): LineRange {
        val end = if (endLine > startLine && endColumn <= 1) endLine - 1 else endLine
        return LineRange(startLine, maxOf(startLine, end))
    }
}
