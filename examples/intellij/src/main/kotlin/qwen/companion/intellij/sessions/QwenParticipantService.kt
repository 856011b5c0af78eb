package qwen.companion.intellij.sessions

import com.intellij.execution.ExecutionListener
import com.intellij.execution.ExecutionManager
import com.intellij.execution.process.ProcessEvent
import com.intellij.execution.process.ProcessHandler
import com.intellij.execution.process.ProcessListener
import com.intellij.execution.runners.ExecutionEnvironment
import com.intellij.ide.util.PropertiesComponent
import com.intellij.notification.NotificationType
import com.intellij.openapi.Disposable
import com.intellij.openapi.components.Service
import com.intellij.openapi.components.service
import com.intellij.openapi.diagnostic.Logger
import com.intellij.openapi.diagnostic.logger
import com.intellij.openapi.project.Project
import com.intellij.openapi.util.Key
import com.intellij.openapi.wm.ToolWindowManager
import qwen.companion.intellij.IdeaHostLog
import qwen.companion.intellij.QwenCompanionService
import qwen.companion.intellij.core.plugins.Html
import qwen.companion.intellij.core.sessions.ConsoleCapture
import qwen.companion.intellij.core.sessions.HeldMessage
import qwen.companion.intellij.core.sessions.IdeParticipant
import qwen.companion.intellij.core.sessions.InboxPolicy
import qwen.companion.intellij.core.sessions.ParticipantListener
import qwen.companion.intellij.core.sessions.ParticipantName
import qwen.companion.intellij.core.sessions.ParticipantSettings
import qwen.companion.intellij.core.sessions.ReceivedMessage
import qwen.companion.intellij.core.sessions.SentMessage
import qwen.companion.intellij.ui.PluginRunner
import qwen.companion.intellij.ui.QwenPluginUi
import java.util.concurrent.CopyOnWriteArrayList

/**
 * The project's cross-session participant (kind `external`, named
 * `intellij-<project>` or the "Participant name" setting): registered when
 * the project opens ([QwenSessionsStartup]), unregistered when it closes.
 * Messages from sessions become balloons and rows of the "Qwen messages"
 * tool window; held messages wait there for Release / Deny. It also keeps the
 * output of the project's last run (the run console) for "Send Last Run
 * Output to Session".
 */
@Service(Service.Level.PROJECT)
class QwenParticipantService(private val project: Project) : Disposable {
    private val log: Logger = logger<QwenParticipantService>()
    private val refreshers = CopyOnWriteArrayList<() -> Unit>()
    val console = ConsoleCapture()
    private var lastHeldCount = 0

    val participant: IdeParticipant = IdeParticipant(settings(), Listener(), IdeaHostLog(log))

    /** The settings from the IDE's options (name) and this project's inbox policy. */
    fun settings(): ParticipantSettings = ParticipantSettings(
        // The companion's name for the project (the setting, else intellij-<project>), kept to what the registry holds whole.
        name = ParticipantName.derive(project.name, project.service<QwenCompanionService>().participantName),
        cwd = project.basePath ?: System.getProperty("user.home"),
        policy = policy()
    )

    fun policy(): InboxPolicy = InboxPolicy.of(PropertiesComponent.getInstance(project).getValue(POLICY_KEY))

    /** Stores and applies a new inbox policy; null, or why it could not be applied. */
    fun setPolicy(p: InboxPolicy): String? {
        PropertiesComponent.getInstance(project).setValue(POLICY_KEY, if (p == InboxPolicy.DEFAULT) null else p.setting)
        return participant.setPolicy(p)
    }

    /** Registers (off the UI thread) and starts following the run consoles. */
    fun start() {
        project.messageBus.connect(this).subscribe(ExecutionManager.EXECUTION_TOPIC, object : ExecutionListener {
            override fun processStarted(executorId: String, env: ExecutionEnvironment, handler: ProcessHandler) {
                val token = console.started(env.runProfile.name)
                handler.addProcessListener(object : ProcessListener {
                    override fun onTextAvailable(event: ProcessEvent, outputType: Key<*>) {
                        console.append(token, event.text)
                    }
                })
            }
        })
        QwenPluginUi.pooled {
            if (!participant.start()) {
                PluginRunner.notify(project, "Qwen sessions are off", Html.escape(participant.lastError ?: ""), NotificationType.WARNING)
            }
            refresh()
        }
    }

    /** The name or policy setting changed: register again under the new settings (off the UI thread). */
    fun reconfigure() {
        val s = settings()
        if (s == participant.settings) return
        QwenPluginUi.pooled {
            participant.restart(s)
            refresh()
        }
    }

    fun addRefresher(r: () -> Unit) {
        refreshers.add(r)
    }

    fun refresh() {
        QwenPluginUi.onEdt { if (!project.isDisposed) for (r in refreshers) r() }
    }

    private fun showMessages() {
        ToolWindowManager.getInstance(project).getToolWindow(QwenMessagesToolWindowFactory.ID)?.show(null)
    }

    private inner class Listener : ParticipantListener {
        override fun messageReceived(m: ReceivedMessage) {
            refresh()
            QwenPluginUi.onEdt {
                if (project.isDisposed) return@onEdt
                val first = m.places.firstOrNull()
                if (first != null) {
                    PluginRunner.notify(project, "Qwen message from ${m.sender()}", m.text, NotificationType.INFORMATION, "Open $first") {
                        QwenMessagesPanel.open(project, first)
                    }
                } else {
                    PluginRunner.notify(project, "Qwen message from ${m.sender()}", m.text, NotificationType.INFORMATION, "Show") { showMessages() }
                }
            }
        }

        override fun heldChanged(held: List<HeldMessage>) {
            refresh()
            val grew = held.size > lastHeldCount
            lastHeldCount = held.size
            if (grew) QwenPluginUi.onEdt {
                if (!project.isDisposed) PluginRunner.notify(project, "Qwen: ${held.size} message(s) held for your review",
                    Html.escape(held.last().describe(System.currentTimeMillis())), NotificationType.INFORMATION, "Review") { showMessages() }
            }
        }

        override fun receiptChanged(m: SentMessage) {
            refresh()
            if (!m.isFinal && m.state != "not-sent") return
            val ok = m.state == "delivered"
            QwenPluginUi.onEdt {
                if (!project.isDisposed) PluginRunner.notify(project, if (ok) "Qwen: delivered" else "Qwen: message ${m.state}",
                    Html.escape(m.describe()), if (ok) NotificationType.INFORMATION else NotificationType.WARNING)
            }
        }
    }

    override fun dispose() {
        participant.close()
    }

    companion object {
        const val POLICY_KEY = "qwen.companion.inboxPolicy"

        fun getInstance(project: Project): QwenParticipantService = project.service<QwenParticipantService>()
    }
}
