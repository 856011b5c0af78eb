package qwen.companion.intellij

import com.intellij.openapi.components.service
import com.intellij.openapi.project.Project
import org.jetbrains.plugins.terminal.LocalTerminalCustomizer
import qwen.companion.intellij.core.TerminalEnv

/**
 * Adds the variables of every CLI the companion serves
 * (`QWEN_CODE_IDE_SERVER_PORT`, `QWEN_CODE_IDE_WORKSPACE_PATH`;
 * `GEMINI_CLI_IDE_SERVER_PORT`, `GEMINI_CLI_IDE_WORKSPACE_PATH`,
 * `GEMINI_CLI_IDE_PID`) and the plugin MCP server's, if any, to every
 * terminal the IDE opens for the project — those restored at project open
 * too, which starts the companion first when needed — so `qwen` or `gemini`
 * started there connects to this IDE. Registered only when the Terminal plugin is present
 * (`qwen-terminal.xml`).
 *
 * This 4-argument overload exists from 2023.1 to today's builds; newer
 * platforms call it from their 5-argument (EelDescriptor) variant and have
 * deprecated the extension point in favour of the experimental
 * `ShellExecOptionsCustomizer`.
 */
class QwenTerminalCustomizer : LocalTerminalCustomizer() {
    @Suppress("OVERRIDE_DEPRECATION")
    override fun customizeCommandAndEnvironment(
        project: Project,
        workingDirectory: String?,
        command: Array<String>,
        envs: MutableMap<String, String>
    ): Array<String> {
        if (project.isDisposed) return command
        val service = project.service<QwenCompanionService>()
        // A terminal restored at project open can start before QwenCompanionStartup ran.
        service.start()
        TerminalEnv.applyTo(envs, service.terminalEnv())
        return command
    }
}
