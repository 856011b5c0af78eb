package qwen.companion.intellij.sessions

import com.intellij.openapi.project.Project
import org.jetbrains.plugins.terminal.LocalTerminalCustomizer

/**
 * Gives the IDE's terminals `QWEN_CODE_MESSAGING_SOCKET` and
 * `QWEN_CODE_MESSAGING_TOKEN` of the project's participant: a script or tool
 * run there can message the IDE as `own-process` (delivered under the
 * default inbox policy, exempt from the repeat check). Qwen Code itself
 * drops inherited values when a session starts, so a `qwen` started in the
 * terminal stays an ordinary peer (shown as "(this IDE)" in the sessions list).
 */
class QwenSessionsTerminalCustomizer : LocalTerminalCustomizer() {
    @Suppress("OVERRIDE_DEPRECATION")
    override fun customizeCommandAndEnvironment(
        project: Project,
        workingDirectory: String?,
        command: Array<String>,
        envs: MutableMap<String, String>
    ): Array<String> {
        if (!project.isDisposed) envs.putAll(QwenParticipantService.getInstance(project).participant.childEnv())
        return command
    }
}
