package qwen.companion.intellij.core.plugins

/**
 * A plugin's keybinding (`keybindings[].key` of its manifest, written as the
 * desktop app writes them: `mod+shift+d`, `ctrl+alt+f5`, `mod+,`) mapped to
 * the IntelliJ keymap.
 *
 * `mod` is the platform's command key: Cmd (`meta`) on macOS, Ctrl elsewhere.
 * `cmd`/`meta`/`super` are always meta, `ctrl`/`control` always ctrl,
 * `alt`/`option` alt, `shift` shift. The result is an AWT key-stroke string
 * (`KeyStroke.getKeyStroke("ctrl shift D")`), which is also what IntelliJ's
 * keymap XML writes, plus a label for menus.
 */
data class KeyChord(
    val ctrl: Boolean,
    val alt: Boolean,
    val shift: Boolean,
    val meta: Boolean,
    /** The AWT key name without `VK_`: `D`, `F5`, `COMMA`, `ENTER`. */
    val key: String
) {
    /** `KeyStroke.getKeyStroke` syntax, modifiers in a fixed order: `ctrl alt shift meta KEY`. */
    fun awt(): String {
        val parts = ArrayList<String>()
        if (ctrl) parts.add("ctrl")
        if (alt) parts.add("alt")
        if (shift) parts.add("shift")
        if (meta) parts.add("meta")
        parts.add(key)
        return parts.joinToString(" ")
    }

    /** What a menu shows: `⌃⌥⇧⌘D` on macOS, `Ctrl+Alt+Shift+D` elsewhere. */
    fun label(macOs: Boolean): String {
        val k = KEY_LABELS[key] ?: key
        if (macOs) {
            val sb = StringBuilder()
            if (ctrl) sb.append('⌃')
            if (alt) sb.append('⌥')
            if (shift) sb.append('⇧')
            if (meta) sb.append('⌘')
            return sb.append(k).toString()
        }
        val parts = ArrayList<String>()
        if (ctrl) parts.add("Ctrl")
        if (alt) parts.add("Alt")
        if (shift) parts.add("Shift")
        if (meta) parts.add("Meta")
        parts.add(k)
        return parts.joinToString("+")
    }

    companion object {
        private val KEY_LABELS = mapOf(
            "COMMA" to ",", "PERIOD" to ".", "SLASH" to "/", "SEMICOLON" to ";", "QUOTE" to "'",
            "OPEN_BRACKET" to "[", "CLOSE_BRACKET" to "]", "BACK_SLASH" to "\\", "MINUS" to "-",
            "EQUALS" to "=", "BACK_QUOTE" to "`", "SPACE" to "Space", "ENTER" to "Enter", "ESCAPE" to "Esc",
            "TAB" to "Tab", "BACK_SPACE" to "Backspace", "DELETE" to "Delete", "UP" to "↑", "DOWN" to "↓",
            "LEFT" to "←", "RIGHT" to "→", "HOME" to "Home", "END" to "End", "PAGE_UP" to "PgUp",
            "PAGE_DOWN" to "PgDn", "INSERT" to "Insert"
        )
    }
}

object Keybindings {
    private val NAMED = mapOf(
        "enter" to "ENTER", "return" to "ENTER", "esc" to "ESCAPE", "escape" to "ESCAPE", "space" to "SPACE",
        "tab" to "TAB", "backspace" to "BACK_SPACE", "delete" to "DELETE", "del" to "DELETE", "insert" to "INSERT",
        "up" to "UP", "down" to "DOWN", "left" to "LEFT", "right" to "RIGHT", "home" to "HOME", "end" to "END",
        "pageup" to "PAGE_UP", "pagedown" to "PAGE_DOWN",
        "," to "COMMA", "." to "PERIOD", "/" to "SLASH", ";" to "SEMICOLON", "'" to "QUOTE", "[" to "OPEN_BRACKET",
        "]" to "CLOSE_BRACKET", "\\" to "BACK_SLASH", "-" to "MINUS", "=" to "EQUALS", "`" to "BACK_QUOTE",
        "plus" to "PLUS"
    )

    /** True when [osName] (the `os.name` property) is macOS. */
    fun isMac(osName: String?): Boolean = osName != null && osName.toLowerCase().startsWith("mac")

    /**
     * Parses [spec] for the platform ([macOs]).
     * @throws IllegalArgumentException naming what is wrong (empty, unknown
     * modifier or key, a modifier twice, no key, two keys).
     */
    fun parse(spec: String, macOs: Boolean): KeyChord {
        val text = spec.trim()
        require(text.isNotEmpty()) { "empty keybinding" }
        // "mod++" / "ctrl+," : a trailing "+" after a "+" is the plus key itself.
        val tokens = ArrayList<String>()
        var rest = text
        if (rest.endsWith("++")) {
            tokens.add("plus")
            rest = rest.substring(0, rest.length - 2)
        }
        if (rest.isNotEmpty()) tokens.addAll(0, rest.split('+').map { it.trim().toLowerCase() })
        var ctrl = false
        var alt = false
        var shift = false
        var meta = false
        var key: String? = null
        fun set(cur: Boolean, name: String): Boolean {
            require(!cur) { "modifier '$name' given twice in '$spec'" }
            return true
        }
        for (t in tokens) {
            when (t) {
                "" -> throw IllegalArgumentException("empty part in keybinding '$spec'")
                "mod" -> if (macOs) meta = set(meta, t) else ctrl = set(ctrl, t)
                "ctrl", "control" -> ctrl = set(ctrl, t)
                "cmd", "command", "meta", "super" -> meta = set(meta, t)
                "alt", "option", "opt" -> alt = set(alt, t)
                "shift" -> shift = set(shift, t)
                else -> {
                    require(key == null) { "two keys ('$key' and '$t') in keybinding '$spec'" }
                    key = keyName(t) ?: throw IllegalArgumentException("unknown key '$t' in keybinding '$spec'")
                }
            }
        }
        val k = key ?: throw IllegalArgumentException("keybinding '$spec' has modifiers but no key")
        return KeyChord(ctrl, alt, shift, meta, k)
    }

    private fun keyName(t: String): String? {
        NAMED[t]?.let { return it }
        if (t.length == 1) {
            val c = t[0]
            if (c in 'a'..'z' || c in '0'..'9') return c.toUpperCase().toString()
        }
        if (t.length in 2..3 && t[0] == 'f') {
            val n = t.substring(1).toIntOrNull()
            if (n != null && n in 1..24) return "F$n"
        }
        return null
    }
}
