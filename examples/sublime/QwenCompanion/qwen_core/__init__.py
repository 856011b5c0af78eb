"""Helpers of the QwenCompanion package (not plugins: Sublime Text loads only
the package's top-level ``.py`` files as plugins, never this folder's)."""
