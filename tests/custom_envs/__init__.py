"""Environments written outside rollax, as a user writes them, for the tests that name them by
import path (``custom_envs.point_mass:make``): the tests put this folder's parent on
``sys.path``."""
