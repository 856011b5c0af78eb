package qwen.companion.intellij.core.plugins

import qwen.companion.QwenCompanionException
import java.io.File

/** What became of a file dropped on the Qwen tool window. */
sealed class DropOutcome {
    abstract val file: File
    /** A plugin parsed it: [text] is what it extracted. */
    data class Parsed(override val file: File, val mimeType: String, val parser: PluginDocumentParser, val text: String) : DropOutcome()
    /** The parser answered `{success: false, reason}`, or the call failed. */
    data class Failed(override val file: File, val mimeType: String, val parser: PluginDocumentParser?, val reason: String) : DropOutcome()
    /** No enabled plugin parses this type; [mimeType] null when the type is unknown. */
    data class NoParser(override val file: File, val mimeType: String?) : DropOutcome()

    /** One sentence for the user. */
    fun message(): String = when (this) {
        is Parsed -> "${file.name}: parsed by ${parser.pluginId} (${text.length} characters)"
        is Failed -> "${file.name}: " + (if (parser == null) "" else "${parser.pluginId} could not parse it: ") + reason
        is NoParser -> "${file.name}: " + if (mimeType == null) "unknown file type" else "no enabled plugin parses $mimeType"
    }
}

/**
 * `documentParsers`: a file dropped on the Qwen tool window goes to the
 * plugin that declares its MIME type (`params = {base64}`), which answers
 * `{success: true, text}` or `{success: false, reason}`.
 */
object DocumentDrop {
    /** Largest file offered (its base64 must fit the host's 16 MiB message limit). */
    const val MAX_BYTES = 12L * 1024 * 1024

    private val BY_EXTENSION = mapOf(
        "md" to "text/markdown", "markdown" to "text/markdown", "txt" to "text/plain", "text" to "text/plain",
        "csv" to "text/csv", "html" to "text/html", "htm" to "text/html", "json" to "application/json",
        "xml" to "application/xml", "pdf" to "application/pdf", "rtf" to "application/rtf",
        "docx" to "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "xlsx" to "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        "pptx" to "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        "doc" to "application/msword", "xls" to "application/vnd.ms-excel", "odt" to "application/vnd.oasis.opendocument.text",
        "png" to "image/png", "jpg" to "image/jpeg", "jpeg" to "image/jpeg", "gif" to "image/gif", "svg" to "image/svg+xml"
    )

    /** The MIME type of [name] from its extension, or null. */
    fun mimeType(name: String): String? {
        val dot = name.lastIndexOf('.')
        if (dot < 0 || dot == name.length - 1) return null
        return BY_EXTENSION[name.substring(dot + 1).toLowerCase()]
    }

    /** The parser for [file], or null (with the MIME type found, if any). */
    fun parserFor(file: File, contributions: Contributions): Pair<String?, PluginDocumentParser?> {
        val mime = mimeType(file.name) ?: return Pair(null, null)
        return Pair(mime, contributions.parserFor(mime))
    }

    /** Parses [file] with its plugin (blocking: off the UI thread). Never throws for a plugin or file failure. */
    fun handle(file: File, contributions: Contributions, backend: PluginBackend): DropOutcome {
        val (mime, parser) = parserFor(file, contributions)
        if (mime == null || parser == null) return DropOutcome.NoParser(file, mime)
        if (!file.isFile) return DropOutcome.Failed(file, mime, parser, "not a regular file")
        val size = file.length()
        if (size > MAX_BYTES) return DropOutcome.Failed(file, mime, parser, "the file is $size bytes, over the $MAX_BYTES a plugin can be given")
        val data = try {
            file.readBytes()
        } catch (e: java.io.IOException) {
            return DropOutcome.Failed(file, mime, parser, "cannot read it: ${e.message}")
        }
        val r = try {
            backend.parseDocument(mime, data)
        } catch (e: QwenCompanionException.Call) {
            return DropOutcome.Failed(file, mime, parser, e.detail)
        }
        if (r["success"] == true) {
            val text = r["text"] as? String ?: return DropOutcome.Failed(file, mime, parser, "the plugin returned no text")
            return DropOutcome.Parsed(file, mime, parser, text)
        }
        return DropOutcome.Failed(file, mime, parser, r["reason"] as? String ?: "the plugin gave no reason")
    }
}
