"""The action distributions, where the networks' users have long imported them: they live in
:mod:`rollax.distributions`, below both the networks and the policies that build them."""

from rollax.distributions import (
    MASK_LOGIT,
    PAD_LOGIT,
    Bernoulli,
    Categorical,
    DiagGaussian,
    Distribution,
    MultiCategorical,
    masked,
)

__all__ = ["MASK_LOGIT", "PAD_LOGIT", "Bernoulli", "Categorical", "DiagGaussian", "Distribution",
           "MultiCategorical", "masked"]
