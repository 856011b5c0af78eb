package qwen.companion.intellij.core.plugins

import java.io.File

/** One todo of a `renderAs: "checklist"` tool. */
data class ChecklistItem(val id: String, val content: String, val status: String) {
    val done: Boolean get() = status == "completed"
}

/** A file the tool produced (`details.filePath`, `details.fileName`): shown as a card that opens the file. */
data class FileCard(val path: String, val name: String)

/** How the IDE shows a tool result. */
class ToolResultView(
    val pluginId: String,
    val tool: String,
    /** The text blocks of `content`, joined (other blocks named, e.g. `[image image/png]`). */
    val text: String,
    /** Non-null for a `renderAs: "checklist"` tool with todos. */
    val checklist: List<ChecklistItem>?,
    /** Non-null when the result names a file. */
    val fileCard: FileCard?
) {
    /** The result as HTML for the Qwen tool window (all plugin text escaped). */
    fun html(): String {
        val sb = StringBuilder("<html><body>")
        if (checklist != null) sb.append(Checklist.html(checklist)) else if (text.isNotEmpty()) {
            sb.append("<pre>").append(Html.escape(text)).append("</pre>")
        }
        if (fileCard != null) {
            sb.append("<p>\uD83D\uDCC4 <a href=\"").append(Html.escape(File(fileCard.path).toURI().toString())).append("\">")
                .append(Html.escape(fileCard.name)).append("</a> <small>").append(Html.escape(fileCard.path)).append("</small></p>")
        }
        return sb.append("</body></html>").toString()
    }

    companion object {
        /**
         * Builds the view of [result] (`{content, details?}`) of [tool]. The
         * checklist comes from the call's `todos` argument (the manifest
         * format) or, when the call had none, from `details.todos`.
         */
        fun of(pluginId: String, tool: String, params: Map<String, Any?>, result: Map<String, Any?>, checklistTool: Boolean): ToolResultView {
            val details = result["details"] as? Map<*, *>
            val todos = if (!checklistTool) null else Checklist.parse(params["todos"]) ?: Checklist.parse(details?.get("todos"))
            return ToolResultView(pluginId, tool, contentText(result["content"]), todos, FileCards.of(details))
        }

        fun contentText(content: Any?): String {
            val parts = ArrayList<String>()
            for (b in (content as? List<*>) ?: emptyList<Any?>()) {
                val block = b as? Map<*, *> ?: continue
                when (val type = block["type"]) {
                    "text" -> (block["text"] as? String)?.let { parts.add(it) }
                    "image", "audio" -> parts.add("[$type ${block["mimeType"] ?: ""}]".replace(" ]", "]"))
                    "resource", "resource_link" -> parts.add("[$type ${(block["uri"] ?: (block["resource"] as? Map<*, *>)?.get("uri")) ?: ""}]")
                    else -> parts.add("[$type]")
                }
            }
            return parts.joinToString("\n")
        }
    }
}

object Checklist {
    /** The todos of [v] (`[{id, content, status}]`), or null when it is not such a list. */
    fun parse(v: Any?): List<ChecklistItem>? {
        val l = v as? List<*> ?: return null
        val out = ArrayList<ChecklistItem>()
        for ((i, t) in l.withIndex()) {
            val m = t as? Map<*, *> ?: return null
            val content = m["content"] as? String ?: return null
            val status = (m["status"] as? String)?.takeIf { it in STATUSES } ?: "pending"
            out.add(ChecklistItem(m["id"]?.toString() ?: (i + 1).toString(), content, status))
        }
        return out
    }

    private val STATUSES = setOf("pending", "in_progress", "completed")

    private fun mark(status: String): String = when (status) {
        "completed" -> "[x]"
        "in_progress" -> "[~]"
        else -> "[ ]"
    }

    /** Plain text: `[x] done`, `[~] in progress`, `[ ] pending`, then `2/3 done`. */
    fun text(items: List<ChecklistItem>): String {
        val sb = StringBuilder()
        for (i in items) sb.append(mark(i.status)).append(' ').append(i.content).append('\n')
        return sb.append(summary(items)).toString()
    }

    fun summary(items: List<ChecklistItem>): String = "${items.count { it.done }}/${items.size} done"

    /** HTML: one line per todo with a box (☑ done, ◐ in progress, ☐ pending), struck through when done. */
    fun html(items: List<ChecklistItem>): String {
        val sb = StringBuilder("<ul style=\"list-style:none\">")
        for (i in items) {
            val box = when (i.status) { "completed" -> "☑"; "in_progress" -> "◐"; else -> "☐" }
            val c = Html.escape(i.content)
            sb.append("<li>").append(box).append(' ')
            if (i.done) sb.append("<s>").append(c).append("</s>") else if (i.status == "in_progress") sb.append("<b>").append(c).append("</b>") else sb.append(c)
            sb.append("</li>")
        }
        return sb.append("</ul><p>").append(Html.escape(summary(items))).append("</p>").toString()
    }
}

object FileCards {
    /** The file card of a result's [details], or null (no `filePath`, or not absolute). */
    fun of(details: Map<*, *>?): FileCard? {
        val p = details?.get("filePath") as? String ?: return null
        if (!File(p).isAbsolute) return null
        val name = (details["fileName"] as? String)?.takeIf { it.isNotBlank() } ?: File(p).name
        return FileCard(File(p).normalize().path, name)
    }
}

object Html {
    fun escape(s: String): String {
        val sb = StringBuilder(s.length + 16)
        for (c in s) {
            when (c) {
                '<' -> sb.append("&lt;")
                '>' -> sb.append("&gt;")
                '&' -> sb.append("&amp;")
                '"' -> sb.append("&quot;")
                '\'' -> sb.append("&#39;")
                else -> sb.append(c)
            }
        }
        return sb.toString()
    }
}
