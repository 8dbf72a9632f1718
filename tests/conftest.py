import jax

# A silent (T, B) vs (T, B, 1) broadcast is an error in the tests.
jax.config.update("jax_numpy_rank_promotion", "raise")
