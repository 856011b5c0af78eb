package qwen.companion.intellij

import com.intellij.openapi.components.service
import com.intellij.openapi.project.Project
import com.intellij.openapi.startup.ProjectActivity

/** Starts the project's companion once the project is open (runs off the UI thread). */
class QwenCompanionStartup : ProjectActivity {
    override suspend fun execute(project: Project) {
        project.service<QwenCompanionService>().start()
    }
}
