package qwen.companion.intellij.core

import qwen.companion.CompanionCli
import qwen.companion.DiscoveryFiles
import java.io.File

/** The agent CLIs the plugin starts in a terminal ("Run Qwen Code", "Run Gemini CLI"). */
enum class AgentCli(
    /** The product name, also the terminal tab's name. */
    val title: String,
    /** The short name in action texts ("Add File to Gemini Prompt"). */
    val shortName: String
) {
    QWEN("Qwen Code", "Qwen"),
    GEMINI("Gemini CLI", "Gemini");

    /** True when a companion serving [cli] lets this agent connect to the IDE. */
    fun servedBy(cli: CompanionCli): Boolean = if (this == QWEN) cli.servesQwen else cli.servesGemini

    /** The command of the settings that starts this agent. */
    fun command(options: CompanionOptions): String = if (this == QWEN) options.runCommand else options.geminiCommand

    /** The default command. */
    val defaultCommand: String
        get() = if (this == QWEN) CompanionOptions.DEFAULT_RUN_COMMAND else CompanionOptions.DEFAULT_GEMINI_COMMAND
}

/** What "Run Qwen Code" / "Run Gemini CLI" opens: a terminal tab in the project folder running the configured command. */
object RunAgent {
    class Plan(val agent: AgentCli, val workingDirectory: String?, val tabName: String, val command: String)

    fun plan(agent: AgentCli, options: CompanionOptions, projectDir: String?): Plan {
        val command = agent.command(options).trim().ifEmpty { agent.defaultCommand }
        require(command.indexOf('\n') < 0 && command.indexOf('\r') < 0) { "the command to run ${agent.title} must be one line" }
        val dir = if (projectDir != null && File(projectDir).isDirectory) projectDir else null
        return Plan(agent, dir, agent.title, command)
    }

    /**
     * Why [agent] started now cannot connect to the IDE (the companion's
     * setting [cli] does not serve it), as a notification text; null when it
     * can.
     */
    fun connectionWarning(agent: AgentCli, cli: CompanionCli): String? {
        if (agent.servedBy(cli)) return null
        val need = if (agent == AgentCli.GEMINI) "Gemini CLI or Both" else "Qwen Code or Both"
        return "${agent.title} runs, but it cannot connect to the IDE: the companion serves ${Served.names(cli)} only. " +
            "Set \"CLIs to serve\" to $need in Settings | Tools | Qwen Code Companion (the companion restarts; then start ${agent.title} again)."
    }
}

/** The served CLIs and their discovery files, as the health dialog and the status tooltip show them. */
object Served {
    /** "Qwen Code", "Gemini CLI" or "Qwen Code and Gemini CLI". */
    fun names(cli: CompanionCli): String = when (cli) {
        CompanionCli.QWEN -> AgentCli.QWEN.title
        CompanionCli.GEMINI -> AgentCli.GEMINI.title
        CompanionCli.BOTH -> "${AgentCli.QWEN.title} and ${AgentCli.GEMINI.title}"
    }

    /**
     * `Serving Qwen Code and Gemini CLI` and one line per discovery file
     * (`  Qwen Code lock file: …`, `  Gemini CLI discovery file: …`), or a
     * line saying the companion is not running when [files] is null.
     */
    fun lines(cli: CompanionCli, files: DiscoveryFiles?): List<String> {
        val out = ArrayList<String>()
        if (files == null) {
            out.add("Companion not running (set to serve ${names(cli)})")
            return out
        }
        out.add("Serving ${names(cli)}")
        files.qwen?.let { out.add("  ${AgentCli.QWEN.title} lock file: $it") }
        files.gemini?.let { out.add("  ${AgentCli.GEMINI.title} discovery file: $it") }
        return out
    }
}

/**
 * The agent terminals a project's "Run …" actions opened (at most one per
 * agent) and which was used last, for "Add … to Prompt": the terminal that
 * was started, focused through its Run action, selected in the Terminal
 * tool window or typed into most recently. Thread-safe; [T] is the
 * terminal (the IDE's widget; a plain object in tests).
 */
class AgentTerminals<T : Any> {
    private val lock = Any()
    private val running = LinkedHashMap<AgentCli, T>()
    /** Agents with a running terminal, least recently used first. */
    private val order = ArrayList<AgentCli>()

    /** [agent]'s new terminal [t] (replacing an older one); it becomes the last used. */
    fun started(agent: AgentCli, t: T) {
        synchronized(lock) {
            running[agent] = t
            touch(agent)
        }
    }

    /** [t] ended: forgotten if it is still [agent]'s terminal; true then. */
    fun ended(agent: AgentCli, t: T): Boolean {
        synchronized(lock) {
            if (running[agent] !== t) return false
            running.remove(agent)
            order.remove(agent)
            return true
        }
    }

    /** [agent]'s terminal was focused or typed into: it becomes the last used (no-op when none runs). */
    fun used(agent: AgentCli) {
        synchronized(lock) {
            if (running.containsKey(agent)) touch(agent)
        }
    }

    /** [agent]'s running terminal, or null. */
    operator fun get(agent: AgentCli): T? = synchronized(lock) { running[agent] }

    /** The agent whose terminal [t] is, or null. */
    fun agentOf(t: T): AgentCli? = synchronized(lock) { running.entries.firstOrNull { it.value === t }?.key }

    /** The last used agent with a running terminal, or null. */
    val lastUsed: AgentCli? get() = synchronized(lock) { order.lastOrNull() }

    /**
     * Where a prompt reference goes: [selected] (the terminal tab the user
     * has selected) when it is one of ours, which also makes it the last used;
     * else the last used terminal; null when none runs.
     */
    fun target(selected: T? = null): Pair<AgentCli, T>? {
        synchronized(lock) {
            val sel = if (selected == null) null else running.entries.firstOrNull { it.value === selected }?.key
            if (sel != null) touch(sel)
            val a = order.lastOrNull() ?: return null
            return Pair(a, running.getValue(a))
        }
    }

    private fun touch(agent: AgentCli) {
        order.remove(agent)
        order.add(agent)
    }
}
