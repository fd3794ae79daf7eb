"""Figures of the study: library functions that take data and an optional ``ax`` and return the Figure.

``data_figures`` draws chapter 0; ``layer_figures`` chapters 1-5 (entropy, concatenation,
CKA, filtering, selection); ``drafters`` the drafter and speculative-decoding chapters;
``architectures`` chapter 7's side by side; ``speed_figures`` chapter 9; ``recipe_figures`` the
drafter recipe study; ``data_scale_figures`` the data-scale page (and ``plot_not_run``, the
placeholder every page glues while its study has not run). Shared style: ``_style``.
"""

from activation_wave.plots.data_figures import *  # noqa: F401,F403
from activation_wave.plots.architectures import *  # noqa: F401,F403
from activation_wave.plots.layer_figures import *  # noqa: F401,F403
from activation_wave.plots.speed_figures import *  # noqa: F401,F403
from activation_wave.plots.recipe_figures import *  # noqa: F401,F403
from activation_wave.plots.data_scale_figures import *  # noqa: F401,F403

from activation_wave.plots.drafters import *  # noqa: F401,F403
