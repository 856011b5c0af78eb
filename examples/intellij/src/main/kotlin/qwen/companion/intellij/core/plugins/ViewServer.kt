package qwen.companion.intellij.core.plugins

import qwen.companion.QcStatus
import qwen.companion.QwenCompanionException
import qwen.companion.QwenPluginHost
import java.lang.reflect.InvocationTargetException

/**
 * The host's view server (`qc_plugin_host_views_*`): serves each plugin's
 * views and `ui` panel on 127.0.0.1, every page URL with its own capability.
 * Started once per host; [url] answers `NOT_FOUND` for an unknown or disabled
 * plugin or view.
 *
 * The binding's `viewsStart` / `viewUrl` / `setColorScheme` are looked up at
 * run time, so this plugin also loads with a binding built before the view
 * server: it then says so instead of failing to link.
 */
object ViewServer {
    private fun invoke(host: QwenPluginHost, name: String, vararg args: Any?): Any? {
        val m = host.javaClass.methods.firstOrNull { it.name == name && it.parameterTypes.size == args.size }
            ?: throw QwenCompanionException.Call("qc_plugin_host_$name", QcStatus.NOT_FOUND.code,
                "this qwen-companion library has no view server (QwenPluginHost.$name is missing); update the plugin")
        try {
            return m.invoke(host, *args)
        } catch (e: InvocationTargetException) {
            throw e.targetException
        }
    }

    /** Starts the view server of [host] (a running one is kept). */
    fun start(host: QwenPluginHost) {
        try {
            invoke(host, "viewsStart", null)
        } catch (e: QwenCompanionException.Call) {
            if (e.status != QcStatus.ALREADY_RUNNING) throw e
        }
    }

    fun url(host: QwenPluginHost, pluginId: String, viewId: String?): String =
        invoke(host, "viewUrl", pluginId, viewId) as String

    /** Tells open pages the IDE's scheme (`dark` for a dark theme, else `light`). */
    fun setColorScheme(host: QwenPluginHost, dark: Boolean) {
        invoke(host, "setColorScheme", if (dark) "dark" else "light")
    }
}
