package qwen.companion

/**
 * A small JSON reader/writer, enough for the library's JSON arguments and
 * results (config, roots, terminal env, IdeContext). It keeps the binding free
 * of third-party dependencies (only JNA), so it drops into any JVM host.
 *
 * Values map to: object → [Map] (insertion order kept), array → [List],
 * string → [String], number → [Long] when integral and in range, else [Double],
 * true/false → [Boolean], null → `null`.
 *
 * Written for Kotlin 1.3 (Debian's kotlinc) and current Kotlin alike.
 */
object Json {
    /** Serialises [value] (Map, List/Array, String, Number, Boolean, null). */
    fun write(value: Any?): String {
        val sb = StringBuilder()
        write(value, sb)
        return sb.toString()
    }

    /** Appends [value] as JSON to [out]. */
    fun write(value: Any?, out: StringBuilder) {
        when (value) {
            null -> out.append("null")
            is String -> quote(value, out)
            is Boolean -> out.append(if (value) "true" else "false")
            is Int, is Long, is Short, is Byte -> out.append(value.toString())
            is Double -> {
                require(!value.isNaN() && !value.isInfinite()) { "JSON cannot hold $value" }
                if (value == Math.floor(value) && Math.abs(value) < 1e15) {
                    out.append(value.toLong().toString())
                } else {
                    out.append(value.toString())
                }
            }
            is Float -> write(value.toDouble(), out)
            is Number -> out.append(value.toString())
            is Map<*, *> -> {
                out.append('{')
                var first = true
                for ((k, v) in value) {
                    if (!first) out.append(',')
                    first = false
                    quote(k.toString(), out)
                    out.append(':')
                    write(v, out)
                }
                out.append('}')
            }
            is Iterable<*> -> {
                out.append('[')
                var first = true
                for (v in value) {
                    if (!first) out.append(',')
                    first = false
                    write(v, out)
                }
                out.append(']')
            }
            is Array<*> -> write(value.asList(), out)
            else -> throw IllegalArgumentException("cannot write ${value.javaClass.name} as JSON")
        }
    }

    /** Appends [s] as a JSON string literal. */
    fun quote(s: String, out: StringBuilder) {
        out.append('"')
        for (i in 0 until s.length) {
            val c = s[i]
            when (c) {
                '"' -> out.append("\\\"")
                '\\' -> out.append("\\\\")
                '\n' -> out.append("\\n")
                '\r' -> out.append("\\r")
                '\t' -> out.append("\\t")
                '\b' -> out.append("\\b")
                '\u000C' -> out.append("\\f")
                '\u2028' -> out.append("\\u2028")
                '\u2029' -> out.append("\\u2029")
                else -> if (c < ' ') {
                    out.append("\\u")
                    val hex = Integer.toHexString(s.codePointAt(i))
                    for (pad in hex.length until 4) out.append('0')
                    out.append(hex)
                } else {
                    out.append(c)
                }
            }
        }
        out.append('"')
    }

    /** Parses one JSON document; throws [IllegalArgumentException] on bad input. */
    fun parse(text: String): Any? {
        val p = Parser(text)
        p.skipWs()
        val v = p.value(0)
        p.skipWs()
        if (p.pos != text.length) p.fail("trailing characters")
        return v
    }

    /** Parses a JSON object; throws [IllegalArgumentException] if [text] is not one. */
    fun parseObject(text: String): Map<String, Any?> {
        val v = parse(text)
        if (v !is Map<*, *>) throw IllegalArgumentException("expected a JSON object")
        @Suppress("UNCHECKED_CAST")
        return v as Map<String, Any?>
    }

    private class Parser(val s: String) {
        var pos = 0

        fun fail(what: String): Nothing =
            throw IllegalArgumentException("invalid JSON at offset $pos: $what")

        fun skipWs() {
            while (pos < s.length && (s[pos] == ' ' || s[pos] == '\n' || s[pos] == '\r' || s[pos] == '\t')) pos++
        }

        fun value(depth: Int): Any? {
            if (depth > 512) fail("nested too deeply")
            if (pos >= s.length) fail("unexpected end")
            return when (s[pos]) {
                '{' -> obj(depth)
                '[' -> arr(depth)
                '"' -> str()
                't' -> lit("true", true)
                'f' -> lit("false", false)
                'n' -> lit("null", null)
                else -> num()
            }
        }

        fun lit(word: String, v: Any?): Any? {
            if (!s.startsWith(word, pos)) fail("unexpected character")
            pos += word.length
            return v
        }

        fun obj(depth: Int): Map<String, Any?> {
            val m = LinkedHashMap<String, Any?>()
            pos++
            skipWs()
            if (pos < s.length && s[pos] == '}') {
                pos++
                return m
            }
            while (true) {
                skipWs()
                if (pos >= s.length || s[pos] != '"') fail("expected a key")
                val k = str()
                skipWs()
                if (pos >= s.length || s[pos] != ':') fail("expected ':'")
                pos++
                skipWs()
                m[k] = value(depth + 1)
                skipWs()
                if (pos >= s.length) fail("unexpected end")
                when (s[pos]) {
                    ',' -> pos++
                    '}' -> { pos++; return m }
                    else -> fail("expected ',' or '}'")
                }
            }
        }

        fun arr(depth: Int): List<Any?> {
            val l = ArrayList<Any?>()
            pos++
            skipWs()
            if (pos < s.length && s[pos] == ']') {
                pos++
                return l
            }
            while (true) {
                skipWs()
                l.add(value(depth + 1))
                skipWs()
                if (pos >= s.length) fail("unexpected end")
                when (s[pos]) {
                    ',' -> pos++
                    ']' -> { pos++; return l }
                    else -> fail("expected ',' or ']'")
                }
            }
        }

        fun str(): String {
            pos++ // opening quote
            val sb = StringBuilder()
            while (true) {
                if (pos >= s.length) fail("unterminated string")
                val c = s[pos++]
                when {
                    c == '"' -> return sb.toString()
                    c == '\\' -> {
                        if (pos >= s.length) fail("unterminated escape")
                        when (val e = s[pos++]) {
                            '"' -> sb.append('"')
                            '\\' -> sb.append('\\')
                            '/' -> sb.append('/')
                            'b' -> sb.append('\b')
                            'f' -> sb.append('\u000C')
                            'n' -> sb.append('\n')
                            'r' -> sb.append('\r')
                            't' -> sb.append('\t')
                            'u' -> {
                                if (pos + 4 > s.length) fail("short \\u escape")
                                val code = try {
                                    Integer.parseInt(s.substring(pos, pos + 4), 16)
                                } catch (e: NumberFormatException) {
                                    fail("bad \\u escape")
                                }
                                sb.append(code.toChar())
                                pos += 4
                            }
                            else -> fail("bad escape '\\$e'")
                        }
                    }
                    c < ' ' -> fail("control character in string")
                    else -> sb.append(c)
                }
            }
        }

        fun num(): Any {
            val start = pos
            if (pos < s.length && s[pos] == '-') pos++
            while (pos < s.length && (s[pos] in '0'..'9' || s[pos] == '.' || s[pos] == 'e' || s[pos] == 'E' || s[pos] == '+' || s[pos] == '-')) pos++
            val t = s.substring(start, pos)
            if (t.length == 0 || t == "-") fail("unexpected character")
            val isInt = t.indexOf('.') < 0 && t.indexOf('e') < 0 && t.indexOf('E') < 0
            if (isInt) {
                try {
                    return t.toLong()
                } catch (e: NumberFormatException) {
                    // falls through to a double
                }
            }
            return try {
                t.toDouble()
            } catch (e: NumberFormatException) {
                fail("bad number '$t'")
            }
        }
    }
}
