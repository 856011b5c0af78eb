rootProject.name = "qwen-companion-intellij"
