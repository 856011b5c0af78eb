package qwen.companion

import com.sun.jna.Pointer
import com.sun.jna.ptr.PointerByReference

/**
 * The library's health report (`qc_health_json`): the library's version,
 * `qwen` and `node` found and their versions against the tested ones (and
 * `gemini` when Gemini CLI is served or asked for), the discovery files, the connected CLIs, the plugin MCP server and its
 * `settings.json` registration, and the participant, as
 * `{"library": {version, abi, platform}, "checks": [{id, status, summary,
 * detail?, …}]}` (`status`: `ok`, `warn`, `error` or `off`; show the checks
 * in the order given).
 *
 * It runs `qwen --version` and `node --version` (at most 5 s each): call it
 * off the UI thread.
 */
object QwenHealth {
    /**
     * The report. [qwen] and [node] are the commands or paths to check (null:
     * `qwen` and `node` on [path], null: the process's `PATH`); the objects
     * given (each may be null) add their own checks. [gemini] is the Gemini
     * CLI command to check (null: `gemini`); the `gemini` check runs when
     * [cli] is [CompanionCli.GEMINI] or [CompanionCli.BOTH], or ([cli] null)
     * when [companion] serves Gemini CLI, and is `off` otherwise (likewise
     * the `qwen` check for Qwen Code).
     */
    @JvmStatic
    @JvmOverloads
    fun report(
        library: QwenCompanionLibrary,
        companion: QwenCompanion? = null,
        pluginHost: QwenPluginHost? = null,
        participant: QwenParticipant? = null,
        qwen: String? = null,
        node: String? = null,
        path: String? = null,
        gemini: String? = null,
        cli: CompanionCli? = null
    ): Map<String, Any?> {
        val fn = "qc_health_json"
        val options = LinkedHashMap<String, Any?>()
        if (qwen != null) options["qwen"] = qwen
        if (node != null) options["node"] = node
        if (path != null) options["path"] = path
        if (gemini != null) options["gemini"] = gemini
        if (cli != null) options["cli"] = cli.id
        val o = if (options.isEmpty()) null else CStrings.terminated(Json.write(options))
        val text = borrow(companion, { c, f -> c.borrowRaw(f) }) { cp ->
            borrow(pluginHost, { h, f -> h.borrowRaw(f) }) { hp ->
                borrow(participant, { p, f -> p.borrowRaw(f) }) { pp ->
                    val out = PointerByReference()
                    val err = PointerByReference()
                    val status = library.native.qc_health_json(o, cp, hp, pp, out, err)
                    val result = library.takeString(out.value)
                    library.check(fn, status, err)
                    result ?: "{}"
                }
            }
        }
        return Json.parseObject(text)
    }

    private fun <O, T> borrow(obj: O?, lend: (O, (Pointer) -> T) -> T, block: (Pointer?) -> T): T =
        if (obj == null) block(null) else lend(obj) { block(it) }
}
