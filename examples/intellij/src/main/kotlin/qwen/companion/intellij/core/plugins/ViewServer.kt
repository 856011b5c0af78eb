package qwen.companion.intellij.core.plugins

import qwen.companion.QcStatus
import qwen.companion.QwenCompanionException
import qwen.companion.QwenPluginHost

/**
 * The host's view server (`qc_plugin_host_views_*`): serves each enabled
 * plugin's views and `ui` panel on 127.0.0.1, every page URL with its own
 * capability (`window.pluginHost` injected). Started once per host on first
 * use; [url] answers `NOT_FOUND` for an unknown or disabled plugin or view.
 */
object ViewServer {
    /** Starts the view server of [host] (a running one is kept). */
    fun start(host: QwenPluginHost) {
        try {
            host.viewsStart(null)
        } catch (e: QwenCompanionException.Call) {
            if (e.status != QcStatus.ALREADY_RUNNING) throw e
        }
    }

    fun url(host: QwenPluginHost, pluginId: String, viewId: String?): String = host.viewUrl(pluginId, viewId)

    /** Tells open pages the IDE's scheme (`dark` for a dark theme, else `light`); allowed before [start]. */
    fun setColorScheme(host: QwenPluginHost, dark: Boolean) = host.setColorScheme(if (dark) "dark" else "light")
}
