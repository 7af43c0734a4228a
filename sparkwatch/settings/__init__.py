"""Every setting of sparkwatch, declared once with one vocabulary (:mod:`.spec`): the listener's
(:mod:`.listener`), the collector's (:mod:`.collector`) and the commands' (:mod:`.cli`), read once
at the edge; command-line options are built from the same declarations (:mod:`.options`).

Standard library only: the listener reads its settings in the Spark driver.
"""

from sparkwatch.settings.listener import (
    DEFAULT_HISTORY_URL,
    DEFAULT_METRICS_PORT,
    LISTENER_FIELDS,
    ListenerSettings,
    load_listener_settings,
    render_settings_table,
)
from sparkwatch.settings.parsers import METRICS_PROFILES, OFF_WORDS
from sparkwatch.settings.spec import Setting, SettingsError

__all__ = [
    "DEFAULT_HISTORY_URL",
    "DEFAULT_METRICS_PORT",
    "LISTENER_FIELDS",
    "METRICS_PROFILES",
    "OFF_WORDS",
    "ListenerSettings",
    "Setting",
    "SettingsError",
    "load_listener_settings",
    "render_settings_table",
]
