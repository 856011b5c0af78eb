package qwen.companion.intellij

import com.intellij.notification.NotificationAction
import com.intellij.notification.NotificationGroupManager
import com.intellij.notification.NotificationType
import com.intellij.openapi.application.ApplicationManager
import com.intellij.openapi.application.ModalityState
import com.intellij.openapi.components.Service
import com.intellij.openapi.components.service
import com.intellij.openapi.options.ShowSettingsUtil
import com.intellij.openapi.project.Project
import com.intellij.terminal.ui.TerminalWidget
import org.jetbrains.plugins.terminal.TerminalToolWindowManager
import qwen.companion.intellij.core.AgentCli
import qwen.companion.intellij.core.AgentTerminals
import qwen.companion.intellij.core.PromptReference
import qwen.companion.intellij.core.RunAgent
import java.io.IOException

/**
 * The agent terminals of a project: the terminal tabs "Run Qwen Code" and
 * "Run Gemini CLI" opened (one per agent: its widget and the folder the CLI
 * runs in), each forgotten when its session ends. "Add … to Prompt" types
 * into the one used last ([AgentTerminals]: started, focused through its Run
 * action, selected in the Terminal tool window or typed into most recently)
 * through the widget's `TtyConnector` — the text only, never Enter — and
 * focuses it. Both CLIs read the same `@path` references. Registered with
 * the Terminal plugin only (qwen-terminal.xml).
 */
@Service(Service.Level.PROJECT)
class QwenTerminals(private val project: Project) {
    private class Running(val widget: TerminalWidget, val cwd: String?)

    private val terminals = AgentTerminals<Running>()

    /**
     * Focuses [agent]'s terminal when it runs; else starts the companion,
     * then opens a terminal tab running the configured command in the
     * project folder. UI thread.
     */
    fun runOrFocus(agent: AgentCli) {
        val r = terminals[agent]
        if (r != null) {
            terminals.used(agent)
            focus(r.widget)
        } else {
            start(agent)
        }
    }

    /**
     * Starts the companion, then opens a terminal tab running [agent]'s
     * command in the project folder; when the companion does not serve
     * [agent], a balloon says the CLI cannot connect and which setting fixes it.
     */
    fun start(agent: AgentCli) {
        val plan = RunAgent.plan(agent, QwenSettings.getInstance().options, project.basePath)
        val app = ApplicationManager.getApplication()
        // Start the companion first (off the UI thread) so the new terminal gets its env.
        app.executeOnPooledThread(Runnable {
            val service = project.service<QwenCompanionService>()
            service.start()
            val warning = RunAgent.connectionWarning(agent, service.servedCli)
            app.invokeLater({
                if (!project.isDisposed) {
                    val widget = TerminalToolWindowManager.getInstance(project)
                        .createShellWidget(plan.workingDirectory, plan.tabName, true, true)
                    val r = Running(widget, plan.workingDirectory)
                    terminals.started(agent, r)
                    widget.addTerminationCallback(Runnable { terminals.ended(agent, r) }, widget)
                    widget.sendCommandToExecute(plan.command)
                    if (warning != null) notifyWithSettings("${agent.title} is not connected to the IDE", warning)
                }
            }, ModalityState.defaultModalityState())
        })
    }

    /** True while [agent]'s terminal tab is running. */
    fun isRunning(agent: AgentCli): Boolean = terminals[agent] != null

    /**
     * The agent "Add … to Prompt" types into without looking at the UI: the
     * last used running terminal's, else the one the settings serve (Gemini
     * CLI when only it is served). Any thread.
     */
    val promptAgent: AgentCli
        get() = terminals.lastUsed
            ?: if (QwenSettings.getInstance().options.cli.servesQwen) AgentCli.QWEN else AgentCli.GEMINI

    /**
     * Types the reference to [path] ([range]: the lines) into the agent
     * terminal used last and focuses it; tells the user (a balloon) when
     * nothing can be typed: no agent terminal (offering to start one), a path
     * the CLI cannot reference, or a terminal that takes no typed text. UI
     * thread.
     */
    fun addReference(path: String, range: PromptReference.LineRange?) {
        val target = terminals.target(selectedWidget()?.let { w -> findRunning(w) })
        if (target == null) {
            val n = NotificationGroupManager.getInstance().getNotificationGroup(QwenCompanionService.NOTIFICATION_GROUP)
                .createNotification(
                    "No agent terminal",
                    "Nothing was added: neither Qwen Code nor Gemini CLI runs in a terminal this plugin opened for ${project.name}. Start one, then add the reference again.",
                    NotificationType.INFORMATION
                )
            val cli = QwenSettings.getInstance().options.cli
            for (agent in AgentCli.values()) {
                if (agent.servedBy(cli)) n.addAction(NotificationAction.createSimpleExpiring("Run ${agent.title}", Runnable { start(agent) }))
            }
            n.notify(project)
            return
        }
        val (agent, r) = target
        when (val ref = PromptReference.build(path, r.cwd, range)) {
            is PromptReference.Result.Refused -> notify("Nothing was added to the ${agent.shortName} prompt", ref.reason, NotificationType.WARNING)
            is PromptReference.Result.Text -> type(agent, r, ref.text)
        }
    }

    private fun type(agent: AgentCli, r: Running, text: String) {
        val tty = r.widget.ttyConnector
        val title = "Nothing was added to the ${agent.shortName} prompt"
        if (tty == null) {
            notify(title, "This terminal takes no typed text from plugins (the IDE's new terminal engine); type $text yourself.", NotificationType.WARNING)
            return
        }
        // The pty write happens off the UI thread; the focus change on it.
        ApplicationManager.getApplication().executeOnPooledThread(Runnable {
            val error = try {
                tty.write(text)
                null
            } catch (e: IOException) {
                e.message ?: e.javaClass.simpleName
            }
            ApplicationManager.getApplication().invokeLater({
                if (project.isDisposed) return@invokeLater
                if (error != null) {
                    notify(title, "The terminal refused the text: $error", NotificationType.WARNING)
                } else {
                    terminals.used(agent)
                    focus(r.widget)
                }
            }, ModalityState.defaultModalityState())
        })
    }

    /** The widget of the Terminal tool window's selected tab, or null. UI thread. */
    private fun selectedWidget(): TerminalWidget? {
        val window = TerminalToolWindowManager.getInstance(project).toolWindow ?: return null
        val content = window.contentManager.selectedContent ?: return null
        return TerminalToolWindowManager.findWidgetByContent(content)
    }

    private fun findRunning(widget: TerminalWidget): Running? =
        AgentCli.values().mapNotNull { terminals[it] }.firstOrNull { it.widget === widget }

    /** Shows the Terminal tool window with [widget]'s tab selected and the terminal focused. */
    private fun focus(widget: TerminalWidget) {
        val window = TerminalToolWindowManager.getInstance(project).toolWindow ?: return
        window.activate(Runnable {
            val content = window.contentManager.contents.firstOrNull { TerminalToolWindowManager.findWidgetByContent(it) === widget }
            if (content != null) window.contentManager.setSelectedContent(content, true)
            widget.requestFocus()
        }, true, true)
    }

    private fun notify(title: String, body: String, type: NotificationType) {
        NotificationGroupManager.getInstance().getNotificationGroup(QwenCompanionService.NOTIFICATION_GROUP)
            .createNotification(title, body, type)
            .notify(project)
    }

    /** A warning balloon with an "Open Settings" link (Settings | Tools | Qwen Code Companion). */
    private fun notifyWithSettings(title: String, body: String) {
        val n = NotificationGroupManager.getInstance().getNotificationGroup(QwenCompanionService.NOTIFICATION_GROUP)
            .createNotification(title, body, NotificationType.WARNING)
        n.addAction(NotificationAction.createSimpleExpiring("Open Settings", Runnable {
            ShowSettingsUtil.getInstance().showSettingsDialog(project, QwenSettingsConfigurable::class.java)
        }))
        n.notify(project)
    }

    companion object {
        fun getInstance(project: Project): QwenTerminals = project.service()
    }
}
