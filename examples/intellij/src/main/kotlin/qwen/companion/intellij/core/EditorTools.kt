package qwen.companion.intellij.core

import qwen.companion.Pending
import java.util.concurrent.ArrayBlockingQueue
import java.util.concurrent.Executor
import java.util.concurrent.RejectedExecutionException
import java.util.concurrent.ThreadFactory
import java.util.concurrent.ThreadPoolExecutor
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger

/** One problem the IDE reports (1-based lines and columns; columns count code points). */
data class EditorDiagnostic(
    val path: String,
    val line: Int,
    val column: Int,
    val endLine: Int?,
    val endColumn: Int?,
    /** `error`, `warning`, `information` or `hint` ([Severities]). */
    val severity: String,
    val message: String,
    /** Who reported it (the inspection or annotator id), if known. */
    val source: String? = null,
    val code: String? = null
)

/** One open editor tab. [language] is the IDE's file type name (see [Languages]). */
data class OpenEditorInfo(val path: String, val active: Boolean, val dirty: Boolean, val language: String?)

/** The selection of the active editor (1-based, end exclusive as the editor shows it). */
data class EditorSelection(
    val path: String,
    val text: String,
    val startLine: Int,
    val startColumn: Int,
    val endLine: Int,
    val endColumn: Int
)

/** A request the editor cannot carry out; its message goes to qwen as the tool's error. */
class EditorToolException(message: String) : Exception(message)

/**
 * What the IDE knows, read on a worker thread (never the library's callback
 * thread, never the UI thread: implementations post UI work and wait for it
 * with a bound). Implemented over the IntelliJ platform by the plugin; faked
 * in the tests.
 */
interface EditorModel {
    /** Problems of [path] (null: every file the IDE has problems for) at least as severe as [minSeverity]. */
    fun diagnostics(path: String?, minSeverity: String): List<EditorDiagnostic>

    /**
     * Opens [path] (never creating it: throw [EditorToolException] when it
     * does not exist), reveals [line]/[column] and selects up to
     * [endLine]/[endColumn] when given, and focuses the editor.
     */
    fun openFile(path: String, line: Int?, column: Int?, endLine: Int?, endColumn: Int?)

    fun openEditors(): List<OpenEditorInfo>

    /** Null when nothing is selected. */
    fun selection(): EditorSelection?
}

/** The four severities of the editor tools, most severe first, and IntelliJ's onto them. */
object Severities {
    val ORDER = listOf("error", "warning", "information", "hint")

    /** 0 for `error` … 3 for `hint`; -1 for an unknown name. */
    fun rank(name: String?): Int = ORDER.indexOf(name)

    /**
     * IntelliJ's `HighlightSeverity` value onto ours: ERROR (400) and above →
     * error; WARNING (300) and GENERIC_SERVER_ERROR_OR_WARNING (350) → warning;
     * WEAK_WARNING (200) → information; anything below with a message
     * (INFORMATION, 10, and custom levels) → hint.
     */
    fun ofIntellij(value: Int): String = when {
        value >= 400 -> "error"
        value >= 300 -> "warning"
        value >= 200 -> "information"
        else -> "hint"
    }

    /** The least IntelliJ severity value that maps to [name] (what to ask the highlighter for). */
    fun intellijFloor(name: String): Int = when (name) {
        "error" -> 400
        "warning" -> 300
        "information" -> 200
        else -> 0
    }
}

/** IntelliJ file type names onto the language ids editors usually send (`python`, `kotlin`, …). */
object Languages {
    private val KNOWN = mapOf(
        "java" to "java", "kotlin" to "kotlin", "python" to "python", "javascript" to "javascript",
        "typescript" to "typescript", "typescript jsx" to "typescriptreact", "jsx harmony" to "javascriptreact",
        "json" to "json", "yaml" to "yaml", "xml" to "xml", "html" to "html", "css" to "css", "markdown" to "markdown",
        "plain_text" to "plaintext", "text" to "plaintext", "rust" to "rust", "go" to "go", "c/c++" to "cpp",
        "objectivec" to "cpp", "c#" to "csharp", "php" to "php", "ruby" to "ruby", "shell script" to "shellscript",
        "groovy" to "groovy", "scala" to "scala", "sql" to "sql", "toml" to "toml", "dockerfile" to "dockerfile",
        "properties" to "properties", "lua" to "lua", "dart" to "dart", "swift" to "swift"
    )

    /** [fileType] (e.g. `JAVA`, `Python`, `PLAIN_TEXT`) as a language id; null for none. */
    fun id(fileType: String?): String? {
        if (fileType == null || fileType.isBlank()) return null
        val key = fileType.trim().toLowerCase()
        return KNOWN[key] ?: key.replace(Regex("[^a-z0-9+#]+"), "-").trim('-').ifEmpty { null }
    }
}

/**
 * The editor's capabilities for qwen (MCP tools `editor-diagnostics`,
 * `editor-open-file`, `editor-open-editors`, `editor-selection` of the
 * plugin MCP server): [install] offers them on the plugin host before its
 * MCP server starts (Qwen Code 0.24.4 lists tools once). Each request is
 * answered later ([Pending]) from [executor], so the library's callback
 * thread never waits for the IDE; a full [executor] answers "busy" at once.
 */
class EditorTools(
    private val model: EditorModel,
    private val log: HostLog,
    private val executor: Executor = boundedExecutor()
) {
    /** Offers the four capabilities on [manager]'s host (now and on every later host it creates). */
    fun install(manager: PluginHostManager) {
        for (c in CAPABILITIES) manager.setCapability(c) { request -> handle(request) }
    }

    /** Handles one capability request (the library's callback thread): returns at once. */
    fun handle(request: Map<String, Any?>): Pending {
        val pending = Pending()
        val capability = request["capability"] as? String ?: ""
        @Suppress("UNCHECKED_CAST")
        val params = request["params"] as? Map<String, Any?> ?: emptyMap()
        try {
            executor.execute {
                try {
                    pending.resolve(answer(capability, params))
                } catch (e: EditorToolException) {
                    pending.reject(e.message ?: "the editor could not do it")
                } catch (t: Throwable) {
                    log.warn("qwen-companion: the $capability tool failed", t)
                    pending.reject("the IDE failed: ${t.message ?: t.javaClass.simpleName}")
                }
            }
        } catch (e: RejectedExecutionException) {
            pending.reject("the IDE is busy answering other editor requests; try again")
        }
        return pending
    }

    /** The answer to [capability] with [params] (on the calling thread). */
    fun answer(capability: String, params: Map<String, Any?>): Map<String, Any?> = when (capability) {
        "editor_diagnostics" -> diagnostics(params)
        "editor_open_file" -> openFile(params)
        "editor_open_editors" -> mapOf("editors" to model.openEditors().take(MAX_ENTRIES).map { editorJson(it) })
        "editor_selection" -> mapOf("selection" to model.selection()?.let { selectionJson(it) })
        else -> throw EditorToolException("unknown editor capability '$capability'")
    }

    private fun diagnostics(params: Map<String, Any?>): Map<String, Any?> {
        val path = optString(params, "path")
        val severity = optString(params, "severity") ?: "hint"
        val rank = Severities.rank(severity)
        if (rank < 0) throw EditorToolException("severity must be one of ${Severities.ORDER.joinToString(", ")}, not '$severity'")
        val out = ArrayList<Map<String, Any?>>()
        for (d in model.diagnostics(path, severity)) {
            if (path != null && d.path != path) continue
            val r = Severities.rank(d.severity)
            if (r < 0 || r > rank) continue
            out.add(diagnosticJson(d))
            if (out.size >= MAX_ENTRIES) break
        }
        return mapOf("diagnostics" to out)
    }

    private fun openFile(params: Map<String, Any?>): Map<String, Any?> {
        val path = optString(params, "path") ?: throw EditorToolException("path is required")
        model.openFile(path, optInt(params, "line"), optInt(params, "column"), optInt(params, "endLine"), optInt(params, "endColumn"))
        return mapOf("opened" to true)
    }

    companion object {
        /** The capabilities, in the order they are offered. */
        val CAPABILITIES = listOf("editor_diagnostics", "editor_open_file", "editor_open_editors", "editor_selection")

        /** Entries per answer (the library keeps at most 500 diagnostics for the model, and says so). */
        const val MAX_ENTRIES = 2000

        /** Two daemon workers and 64 waiting requests; past that a request is refused ("busy"). */
        fun boundedExecutor(): ThreadPoolExecutor {
            val n = AtomicInteger(1)
            val factory = ThreadFactory { r -> Thread(r, "qwen-editor-tools-${n.getAndIncrement()}").also { it.isDaemon = true } }
            return ThreadPoolExecutor(2, 2, 30, TimeUnit.SECONDS, ArrayBlockingQueue(64), factory).also { it.allowCoreThreadTimeOut(true) }
        }

        fun diagnosticJson(d: EditorDiagnostic): Map<String, Any?> {
            val m = LinkedHashMap<String, Any?>()
            m["path"] = d.path
            m["line"] = d.line
            m["column"] = d.column
            if (d.endLine != null) m["endLine"] = d.endLine
            if (d.endColumn != null) m["endColumn"] = d.endColumn
            m["severity"] = d.severity
            m["message"] = d.message
            if (d.source != null) m["source"] = d.source
            if (d.code != null) m["code"] = d.code
            return m
        }

        fun editorJson(e: OpenEditorInfo): Map<String, Any?> {
            val m = LinkedHashMap<String, Any?>()
            m["path"] = e.path
            m["active"] = e.active
            m["dirty"] = e.dirty
            Languages.id(e.language)?.let { m["language"] = it }
            return m
        }

        fun selectionJson(s: EditorSelection): Map<String, Any?> = mapOf(
            "path" to s.path,
            "text" to s.text,
            "start" to mapOf("line" to s.startLine, "column" to s.startColumn),
            "end" to mapOf("line" to s.endLine, "column" to s.endColumn)
        )

        private fun optString(params: Map<String, Any?>, key: String): String? {
            val v = params[key] ?: return null
            return v as? String ?: throw EditorToolException("$key must be a string")
        }

        private fun optInt(params: Map<String, Any?>, key: String): Int? {
            val v = params[key] ?: return null
            val n = (v as? Number) ?: throw EditorToolException("$key must be an integer")
            val l = n.toLong()
            if (l.toDouble() != n.toDouble() || l < 1 || l > Int.MAX_VALUE) throw EditorToolException("$key must be an integer of at least 1")
            return l.toInt()
        }
    }
}

/**
 * 1-based code-point columns from UTF-16 offsets (IntelliJ's documents count
 * UTF-16 units; the editor tools count characters).
 */
object CodePoints {
    /** The 1-based column of UTF-16 offset [offset] in a line starting at [lineStart] of [text]. */
    fun column(text: CharSequence, lineStart: Int, offset: Int): Int {
        val end = minOf(maxOf(offset, lineStart), text.length)
        return Character.codePointCount(text, lineStart, end) + 1
    }

    /** The UTF-16 offset of 1-based code-point [column] in the line [lineStart, lineEnd) of [text] (clamped to the line). */
    fun offset(text: CharSequence, lineStart: Int, lineEnd: Int, column: Int): Int {
        var i = lineStart
        var c = 1
        while (c < column && i < lineEnd) {
            i += if (Character.isHighSurrogate(text[i]) && i + 1 < lineEnd && Character.isLowSurrogate(text[i + 1])) 2 else 1
            c++
        }
        return i
    }
}
