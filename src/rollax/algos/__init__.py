"""Training algorithms."""

from rollax.algos.tabular import (
    TrainConfig,
    TrainMetrics,
    TrainResult,
    make_train,
    resolve_config,
    train,
)

__all__ = ["TrainConfig", "TrainMetrics", "TrainResult", "make_train", "resolve_config", "train"]
