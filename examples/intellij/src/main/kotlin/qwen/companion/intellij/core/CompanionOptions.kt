package qwen.companion.intellij.core

import qwen.companion.CompanionCli
import java.io.File

/**
 * The user's settings of the plugin (Settings | Tools | Qwen Code Companion),
 * IDE-independent so their rules are tested. Null numbers leave the library's
 * default.
 */
data class CompanionOptions(
    /** Start a companion for every project. */
    val enabled: Boolean = true,
    /** What "Run Qwen Code" types into the new terminal. */
    val runCommand: String = DEFAULT_RUN_COMMAND,
    /** Trailing debounce of context updates (library default 50 ms). */
    val debounceMs: Long? = null,
    /** Longest a context update may be held back (library default 200 ms). */
    val maxWaitMs: Long? = null,
    /** How long the library waits for the IDE to show a diff (library default 30000). */
    val requestTimeoutMs: Long = DEFAULT_REQUEST_TIMEOUT_MS,
    /** Run the IDE-wide plugin host and its MCP server. */
    val pluginHostEnabled: Boolean = true,
    /** Plugins directory; null = `$QWEN_HOME/companion/plugins`. */
    val pluginsDir: String? = null,
    /** Register `qwen-companion-plugins` in `~/.qwen/settings.json`. */
    val registerMcp: Boolean = true,
    /** The entry asks Qwen Code to load every plugin tool up front. */
    val alwaysLoadTools: Boolean = false,
    /** Name of the project's messaging participant; null = derived from IDE and project. */
    val participantName: String? = null,
    /** The CLIs the companion serves (its config's `cli`). */
    val cli: CompanionCli = CompanionCli.QWEN,
    /** What "Run Gemini CLI" types into the new terminal. */
    val geminiCommand: String = DEFAULT_GEMINI_COMMAND
) {
    /** Every problem of these values (empty = valid), each a sentence naming the field. */
    fun problems(): List<String> {
        val p = ArrayList<String>()
        if (runCommand.isBlank()) p.add("The command to run Qwen Code is empty.")
        if (runCommand.indexOf('\n') >= 0 || runCommand.indexOf('\r') >= 0 || runCommand.indexOf('\u0000') >= 0) {
            p.add("The command to run Qwen Code must be one line.")
        }
        if (geminiCommand.isBlank()) p.add("The command to run Gemini CLI is empty.")
        if (geminiCommand.indexOf('\n') >= 0 || geminiCommand.indexOf('\r') >= 0 || geminiCommand.indexOf('\u0000') >= 0) {
            p.add("The command to run Gemini CLI must be one line.")
        }
        debounceMs?.let { if (it < 0 || it > 10_000) p.add("Debounce must be between 0 and 10000 ms (got $it).") }
        maxWaitMs?.let { if (it < 0 || it > 60_000) p.add("Max wait must be between 0 and 60000 ms (got $it).") }
        if (debounceMs != null && maxWaitMs != null && maxWaitMs < debounceMs) {
            p.add("Max wait ($maxWaitMs ms) must not be shorter than the debounce ($debounceMs ms).")
        }
        if (requestTimeoutMs < MIN_REQUEST_TIMEOUT_MS || requestTimeoutMs > MAX_REQUEST_TIMEOUT_MS) {
            p.add("The diff request timeout must be between $MIN_REQUEST_TIMEOUT_MS and $MAX_REQUEST_TIMEOUT_MS ms (got $requestTimeoutMs).")
        }
        pluginsDir?.let {
            if (it.isBlank() || !File(it).isAbsolute) p.add("The plugins directory must be an absolute path (got '$it').")
        }
        participantName?.let {
            if (!ParticipantNames.isValid(it)) p.add("The participant name may hold letters, digits, '.', '_' and '-' (1 to 64 characters; got '$it').")
        }
        return p
    }

    /** True when [other] needs a new plugin host (its options differ). */
    fun pluginHostChanged(other: CompanionOptions): Boolean =
        pluginHostEnabled != other.pluginHostEnabled || pluginsDir != other.pluginsDir ||
            registerMcp != other.registerMcp || alwaysLoadTools != other.alwaysLoadTools

    /**
     * True when the projects' companions must restart for [other]: the CLIs
     * served or a timing option differ (a companion takes them when created).
     */
    fun companionChanged(other: CompanionOptions): Boolean =
        cli != other.cli || debounceMs != other.debounceMs || maxWaitMs != other.maxWaitMs ||
            requestTimeoutMs != other.requestTimeoutMs

    /**
     * How long the IDE's diff presenter waits for the UI thread: below the
     * library's [requestTimeoutMs] so the CLI gets the presenter's own answer.
     */
    val showTimeoutMs: Long
        get() = Math.max(MIN_REQUEST_TIMEOUT_MS / 2, requestTimeoutMs - Math.min(SHOW_MARGIN_MS, requestTimeoutMs / 5))

    companion object {
        const val DEFAULT_RUN_COMMAND = "qwen"
        const val DEFAULT_GEMINI_COMMAND = "gemini"
        const val DEFAULT_REQUEST_TIMEOUT_MS = 30_000L
        const val MIN_REQUEST_TIMEOUT_MS = 1_000L
        const val MAX_REQUEST_TIMEOUT_MS = 600_000L
        private const val SHOW_MARGIN_MS = 2_000L

        /**
         * Parses the settings page's text fields: blank numbers are null
         * (library default); returns the options or the problems.
         */
        fun parseNumber(text: String, field: String, problems: MutableList<String>): Long? {
            val t = text.trim()
            if (t.isEmpty()) return null
            val v = t.toLongOrNull()
            if (v == null) problems.add("$field must be a whole number of milliseconds (got '$t').")
            return v
        }
    }
}

/** Names of the editor's messaging participant. */
object ParticipantNames {
    private val VALID = Regex("[A-Za-z0-9._-]{1,64}")

    fun isValid(name: String): Boolean = VALID.matches(name)

    /** `intellij-<project>`: lower case, runs of other characters as one `-`, at most 64 characters. */
    fun derive(ide: String, project: String): String {
        val raw = (slug(ide).ifEmpty { "ide" }) + "-" + (slug(project).ifEmpty { "project" })
        return raw.take(64).trimEnd('-')
    }

    private fun slug(s: String): String =
        s.toLowerCase().replace(Regex("[^a-z0-9._]+"), "-").trim('-')
}

/**
 * The settings page's fields as typed (numbers as text, blank = default),
 * turned into [CompanionOptions] with every problem listed at once.
 */
data class OptionsForm(
    val enabled: Boolean,
    val runCommand: String,
    val debounceMs: String,
    val maxWaitMs: String,
    val requestTimeoutMs: String,
    val pluginHostEnabled: Boolean,
    val pluginsDir: String,
    val registerMcp: Boolean,
    val alwaysLoadTools: Boolean,
    val participantName: String,
    val cli: CompanionCli = CompanionCli.QWEN,
    val geminiCommand: String = CompanionOptions.DEFAULT_GEMINI_COMMAND
) {
    /** The options, or null with the problems (each a sentence). */
    class Parsed(val options: CompanionOptions?, val problems: List<String>)

    fun parse(): Parsed {
        val problems = ArrayList<String>()
        val debounce = CompanionOptions.parseNumber(debounceMs, "Debounce", problems)
        val maxWait = CompanionOptions.parseNumber(maxWaitMs, "Max wait", problems)
        val timeout = CompanionOptions.parseNumber(requestTimeoutMs, "The diff request timeout", problems)
        val o = CompanionOptions(
            enabled = enabled,
            runCommand = runCommand.trim(),
            debounceMs = debounce,
            maxWaitMs = maxWait,
            requestTimeoutMs = timeout ?: CompanionOptions.DEFAULT_REQUEST_TIMEOUT_MS,
            pluginHostEnabled = pluginHostEnabled,
            pluginsDir = pluginsDir.trim().ifEmpty { null },
            registerMcp = registerMcp,
            alwaysLoadTools = alwaysLoadTools,
            participantName = participantName.trim().ifEmpty { null },
            cli = cli,
            geminiCommand = geminiCommand.trim()
        )
        if (problems.isEmpty()) problems.addAll(o.problems())
        return if (problems.isEmpty()) Parsed(o, problems) else Parsed(null, problems)
    }

    companion object {
        /** The fields showing [o]. */
        fun of(o: CompanionOptions) = OptionsForm(
            enabled = o.enabled,
            runCommand = o.runCommand,
            debounceMs = o.debounceMs?.toString() ?: "",
            maxWaitMs = o.maxWaitMs?.toString() ?: "",
            requestTimeoutMs = o.requestTimeoutMs.toString(),
            pluginHostEnabled = o.pluginHostEnabled,
            pluginsDir = o.pluginsDir ?: "",
            registerMcp = o.registerMcp,
            alwaysLoadTools = o.alwaysLoadTools,
            participantName = o.participantName ?: "",
            cli = o.cli,
            geminiCommand = o.geminiCommand
        )
    }
}

/** What "Run Qwen Code" opens ([RunAgent.plan] for [AgentCli.QWEN]). */
object RunQwen {
    fun plan(options: CompanionOptions, projectDir: String?): RunAgent.Plan = RunAgent.plan(AgentCli.QWEN, options, projectDir)
}
