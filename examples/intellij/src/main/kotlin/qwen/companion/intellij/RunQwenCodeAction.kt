package qwen.companion.intellij

import com.intellij.openapi.actionSystem.AnActionEvent
import com.intellij.openapi.project.Project
import qwen.companion.intellij.core.AgentCli

/**
 * Run Qwen Code (Qwen.RunQwenCode): in the main toolbar and Tools menu,
 * Ctrl+Alt+Q (Cmd+Alt+Q on macOS). Focuses the Qwen terminal when it runs; else opens a tab of the IDE's terminal in the
 * project folder — its environment already carries the companion's
 * variables ([QwenTerminalCustomizer]) — and runs the command of the
 * settings (`qwen` by default); [QwenTerminals] keeps that tab for "Add …
 * to Prompt". Registered with the Terminal plugin only (qwen-terminal.xml).
 */
class RunQwenCodeAction : ProjectAction() {
    override fun perform(project: Project, e: AnActionEvent) {
        QwenTerminals.getInstance(project).runOrFocus(AgentCli.QWEN)
    }
}

/**
 * Run Gemini CLI (Qwen.RunGeminiCli): next to Run Qwen Code in the main
 * toolbar and Tools menu, no default shortcut. Focuses the Gemini terminal
 * when it runs; else opens a terminal tab in the project folder running the
 * Gemini command of the settings (`gemini` by default), with every variable
 * of the companion in its environment. When the companion does not serve
 * Gemini CLI (the setting "CLIs to serve" is Qwen Code), Gemini CLI still
 * starts and a balloon says that its IDE connection needs Gemini CLI or Both.
 * Registered with the Terminal plugin only (qwen-terminal.xml).
 */
class RunGeminiCliAction : ProjectAction() {
    override fun perform(project: Project, e: AnActionEvent) {
        QwenTerminals.getInstance(project).runOrFocus(AgentCli.GEMINI)
    }
}
