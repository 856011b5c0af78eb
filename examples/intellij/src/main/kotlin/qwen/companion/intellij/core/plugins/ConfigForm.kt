package qwen.companion.intellij.core.plugins

import qwen.companion.Json
import java.io.File

/** One choice of a `select` setting. */
data class SelectOption(val value: Any?, val label: String, val isAuto: Boolean)

/**
 * The settings page's logic: the choices of a `select` entry (the host's
 * "Auto" first, whose value is the entry's `defaultValue`), parsing what the
 * user typed for `boolean` / `string` / `number`, and the values in effect.
 */
object ConfigForm {
    const val AUTO_LABEL = "Auto"

    /**
     * The choices of [entry] from what `options()` returned ([raw]): exactly
     * one Auto first (value = `defaultValue`), then each other value once, in
     * order, labelled with its `label` (else the value). Entries without a
     * `value` are skipped.
     */
    fun selectOptions(entry: PluginConfigEntry, raw: List<Map<String, Any?>>): List<SelectOption> {
        val out = ArrayList<SelectOption>()
        out.add(SelectOption(entry.defaultValue, AUTO_LABEL, true))
        val seen = HashSet<String>()
        seen.add(Json.write(entry.defaultValue))
        for (o in raw) {
            if (!o.containsKey("value")) continue
            val v = o["value"]
            if (!seen.add(Json.write(v))) continue
            val label = (o["label"] as? String)?.takeIf { it.isNotBlank() } ?: v?.toString() ?: "null"
            out.add(SelectOption(v, label, false))
        }
        return out
    }

    /** The index of [value] among [options] (Auto when it is not there). */
    fun indexOf(options: List<SelectOption>, value: Any?): Int {
        val key = Json.write(value)
        val i = options.indexOfFirst { !it.isAuto && Json.write(it.value) == key }
        return if (i >= 0) i else 0
    }

    /**
     * The value to store for [entry] from the text the user typed ([text]);
     * for `boolean` the text is `true`/`false`.
     * @throws IllegalArgumentException with a sentence for the user.
     */
    fun parse(entry: PluginConfigEntry, text: String): Any? = when (entry.type) {
        "string", "select" -> text
        "boolean" -> when (text.trim().toLowerCase()) {
            "true" -> true
            "false" -> false
            else -> throw IllegalArgumentException("${entry.label}: expected true or false, got '$text'")
        }
        "number" -> {
            val t = text.trim()
            val n = t.toLongOrNull() ?: t.toDoubleOrNull()?.takeIf { !it.isNaN() && !it.isInfinite() }
                ?: throw IllegalArgumentException("${entry.label}: '$text' is not a number")
            n
        }
        else -> throw IllegalArgumentException("${entry.label}: unsupported setting type '${entry.type}'")
    }

    /** How a value is shown in a text field. */
    fun format(value: Any?): String = when (value) {
        null -> ""
        is Double -> if (value == Math.floor(value) && Math.abs(value) < 1e15) value.toLong().toString() else value.toString()
        else -> value.toString()
    }

    /**
     * The values stored for plugin [pluginId] in `<pluginsDir>/state.json`
     * (`{"plugins": {id: {"config": {...}}}}`, the documented layout); empty
     * when the file or entry is missing or unreadable.
     */
    fun storedValues(pluginsDir: String, pluginId: String): Map<String, Any?> {
        val f = File(pluginsDir, "state.json")
        if (!f.isFile) return emptyMap()
        return try {
            val doc = Json.parseObject(f.readText())
            @Suppress("UNCHECKED_CAST")
            (((doc["plugins"] as? Map<*, *>)?.get(pluginId) as? Map<*, *>)?.get("config") as? Map<String, Any?>) ?: emptyMap()
        } catch (e: Exception) {
            emptyMap()
        }
    }

    /** The value in effect for [entry]: the stored one, else the default. */
    fun effective(entry: PluginConfigEntry, stored: Map<String, Any?>): Any? =
        if (stored.containsKey(entry.id)) stored[entry.id] else entry.defaultValue
}
