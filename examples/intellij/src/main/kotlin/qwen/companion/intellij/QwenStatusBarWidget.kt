package qwen.companion.intellij

import com.intellij.openapi.components.service
import com.intellij.openapi.options.ShowSettingsUtil
import com.intellij.openapi.project.Project
import com.intellij.openapi.wm.StatusBar
import com.intellij.openapi.wm.StatusBarWidget
import com.intellij.openapi.wm.StatusBarWidgetFactory
import com.intellij.util.Consumer
import java.awt.event.MouseEvent
import javax.swing.Timer

/** Registers [QwenStatusBarWidget] (plugin.xml `statusBarWidgetFactory`). */
class QwenStatusBarWidgetFactory : StatusBarWidgetFactory {
    override fun getId(): String = QwenStatusBarWidget.ID

    override fun getDisplayName(): String = "Qwen Code Companion"

    override fun isAvailable(project: Project): Boolean = true

    override fun createWidget(project: Project): StatusBarWidget = QwenStatusBarWidget(project)
}

/**
 * "Qwen: 2 CLIs", "Qwen: 1 diff pending", "Qwen: error"… with every detail
 * (port, connected CLIs, pending diffs, last error) in the tooltip; a click
 * opens the settings page. Refreshed every second while installed.
 */
class QwenStatusBarWidget(private val project: Project) : StatusBarWidget, StatusBarWidget.TextPresentation {
    private var statusBar: StatusBar? = null
    private var shown: String? = null
    private val timer = Timer(1000) { refresh() }

    override fun ID(): String = ID

    override fun getPresentation(): StatusBarWidget.WidgetPresentation = this

    override fun install(statusBar: StatusBar) {
        this.statusBar = statusBar
        timer.start()
    }

    private fun status() = if (project.isDisposed) null else project.service<QwenCompanionService>().status()

    private fun refresh() {
        val s = status()
        val key = if (s == null) "" else s.text + "\n" + s.tooltip
        if (key != shown) {
            shown = key
            statusBar?.updateWidget(ID)
        }
    }

    override fun getText(): String = status()?.text ?: ""

    override fun getTooltipText(): String? = status()?.tooltip

    override fun getAlignment(): Float = 0.5f

    override fun getClickConsumer(): Consumer<MouseEvent>? = Consumer {
        ShowSettingsUtil.getInstance().showSettingsDialog(project, QwenSettingsConfigurable::class.java)
    }

    override fun dispose() {
        timer.stop()
        statusBar = null
    }

    companion object {
        const val ID = "QwenCodeCompanionStatus"
    }
}
