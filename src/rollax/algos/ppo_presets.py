"""PPO's tuned settings per task: a table of overrides of the :class:`rollax.algos.ppo.PPOConfig`
defaults, keyed by environment name (``AlgorithmSpec.presets``; ``rollax.ppo.preset``)."""

from __future__ import annotations

from rollax.algos.ppo_zoo import from_zoo

MINATAR: dict = dict(
    total_steps=10_000_000, num_envs=64, num_steps=128, epochs=4, minibatches=8, lr=5e-4,
    anneal_lr=False, gamma=0.999, gae_lambda=0.95, clip_eps=0.2, vf_coef=0.5, ent_coef=0.01,
    max_grad_norm=0.5, hidden=(256, 256), activation="relu", network="cnn",
)
"""MinAtar: gymnax-blines' PPO settings (agents/<game>-MinAtar/ppo.yaml, the same for the five
games; Adam eps 1e-5, a constant lr: its "warm-up" runs from 5e-4 to 5e-4). Not mapped: its
actor-critic is an MLP over the flattened planes with flax's default weights and
uniform(0.05) biases (here rollax's CNN, one 3x3 convolution of 16 planes, under the same
256-256 heads, orthogonal), and its rollouts step 129 times."""

MINATAR_GAMES = {"Asterix": "asterix", "Breakout": "breakout", "Freeway": "freeway",
                 "Seaquest": "seaquest", "SpaceInvaders": "space_invaders"}
"""Each MinAtar game's gymnax name (``gymnax:<name>-MinAtar``) and Pgx name
(``pgx:minatar-<name>``): the same game, so the same preset."""

MUJOCO: dict = dict(
    total_steps=1_000_000, num_envs=1, num_steps=2048, epochs=10, minibatches=32, lr=3e-4,
    anneal_lr=True, gamma=0.99, gae_lambda=0.95, clip_eps=0.2, clip_value=True, vf_coef=0.5,
    ent_coef=0.0, max_grad_norm=0.5, normalize_advantages=True, normalize_observations=True,
    normalize_rewards=True, reward_clip=10.0, hidden=(64, 64), activation="tanh",
    init_log_std=0.0,
)
"""MuJoCo: CleanRL's ``ppo_continuous_action.py`` settings (its defaults, the same for every
task; Adam eps 1e-5, observations and discounted-return-scaled rewards normalised and clipped
to +-10, a state-independent log standard deviation from 0, separate 64-64 tanh actor and
critic). Not mapped: its observation statistics are updated at every environment step (here
merged after each update)."""

MUJOCO_TASKS = ("Ant", "HalfCheetah", "Hopper", "Humanoid", "HumanoidStandup",
                "InvertedDoublePendulum", "InvertedPendulum", "Pusher", "Reacher", "Swimmer",
                "Walker2d")
"""Gymnasium's MuJoCo tasks, ``envpool:<task>-v4``/``-v5`` and ``gymnasium:<task>-v4``/``-v5``:
the same preset for each, except the ``gymnasium:`` tasks rl-baselines3-zoo tunes
(:data:`ZOO_PRESETS`)."""

ATARI: dict = dict(
    total_steps=10_000_000, num_envs=8, num_steps=128, epochs=4, minibatches=4, lr=2.5e-4,
    anneal_lr=True, gamma=0.99, gae_lambda=0.95, clip_eps=0.1, clip_value=True, vf_coef=0.5,
    ent_coef=0.01, max_grad_norm=0.5, normalize_advantages=True, network="nature",
    hidden=(512,), activation="relu", env_options=("episodic_life=true", "reward_clip=true"),
    eval_episodes=8,
)
"""Atari: CleanRL's ``ppo_atari_envpool_xla_jax.py`` settings (its defaults, the same for every
game; Adam eps 1e-5): EnvPool's frames (84x84 grey, 4 stacked, 4 frames per step, up to 30
no-ops at reset, fire at reset, 27,000 steps at most) trained an episode per life with rewards
clipped to their signs (``env_options``), the Nature-DQN CNN (a shared torso, 512 units) and
10M agent steps (40M frames). Evaluation scores whole games, unclipped, 8 of them (not PPO's
default 32: a greedy policy that never serves plays each game to the 27,000-step limit, and 32
such games before the first update took minutes on two cores). Not mapped: CleanRL
clips the gradient's global norm over all parameters (here the torso, actor and critic
apart)."""

ATARI_GAMES = ("Alien", "Amidar", "Assault", "Asterix", "Asteroids", "Atlantis", "BankHeist",
               "BattleZone", "BeamRider", "Bowling", "Boxing", "Breakout", "Centipede",
               "ChopperCommand", "CrazyClimber", "DemonAttack", "DoubleDunk", "Enduro",
               "FishingDerby", "Freeway", "Frostbite", "Gopher", "Gravitar", "Hero",
               "IceHockey", "Jamesbond", "Kangaroo", "Krull", "KungFuMaster",
               "MontezumaRevenge", "MsPacman", "NameThisGame", "Pitfall", "Pong", "PrivateEye",
               "Qbert", "Riverraid", "RoadRunner", "Robotank", "Seaquest", "SpaceInvaders",
               "StarGunner", "Tennis", "TimePilot", "Tutankham", "UpNDown", "Venture",
               "VideoPinball", "WizardOfWor", "Zaxxon")
"""The Atari games of the Nature-DQN benchmark, ``envpool:<game>-v5``: the same preset for
each."""

GRID: dict = dict(network="spatial", hidden=(32, 32, 32), activation="relu")
"""Boards and grids whose actions are their cells (Jumanji's Minesweeper, Pgx's tic-tac-toe):
the spatial network (three 3x3 "same" convolutions of 32 channels, one logit per cell).
Minesweeper keeps PPO's other defaults: the flat 64-64 MLP stays at the random legal
policy's level (greedy return 8.35 at 1,024,000 steps), the spatial network far above it
(benchmarks/QUALITY.md, "Masks and structured actions")."""

TIC_TAC_TOE: dict = dict(GRID, total_steps=524_288, num_envs=32, num_steps=32, lr=3e-3,
                         ent_coef=0.0, opening_moves=6)
"""Tic-tac-toe by self-play: the spatial network, 512 updates of 32 environments x 32 steps,
lr 3e-3, no entropy bonus, and random openings of up to 6 moves. Measured with these settings
(3 seeds, benchmarks/QUALITY.md): every seed's greedy policy never loses to perfect play from
either seat (``rollax.games.tictactoe.against_perfect_play``) and lost none of 200 games a seat
against a random legal player. Without the openings, 65,536 steps: the spatial network never
lost moving first and lost moving second to perfect play (all 3 seeds), as it did at 262,144
and 524,288 steps, with an entropy bonus or a league."""

ZOO = ("DLR-RM/rl-baselines3-zoo hyperparams/ppo.yml at "
       "22e3ff2450fd92033f7f032915e1f64894a09584")
"""Where :data:`ZOO_ENTRIES` come from (the file and the commit read)."""

ZOO_ENTRIES: dict[str, dict] = {
    "CartPole-v1": dict(
        n_envs=8, n_timesteps=100_000, n_steps=32, batch_size=256, gae_lambda=0.8,
        gamma=0.98, n_epochs=20, ent_coef=0.0, learning_rate="lin_0.001", clip_range="lin_0.2"),
    "Acrobot-v1": dict(
        normalize=True, n_envs=16, n_timesteps=1_000_000, n_steps=256, gae_lambda=0.94,
        gamma=0.99, n_epochs=4, ent_coef=0.0),
    "MountainCar-v0": dict(
        normalize=True, n_envs=16, n_timesteps=1_000_000, n_steps=16, gae_lambda=0.98,
        gamma=0.99, n_epochs=4, ent_coef=0.0),
    "MountainCarContinuous-v0": dict(
        normalize=True, n_envs=1, n_timesteps=20_000, batch_size=256, n_steps=8,
        gamma=0.9999, learning_rate=7.77e-05, ent_coef=0.00429, clip_range=0.1, n_epochs=10,
        gae_lambda=0.9, max_grad_norm=5, vf_coef=0.19, use_sde=True,
        policy_kwargs=dict(log_std_init=-3.29, ortho_init=False)),
    "Pendulum-v1": dict(
        n_envs=4, n_timesteps=100_000, n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10,
        ent_coef=0.0, learning_rate=1e-3, clip_range=0.2, use_sde=True, sde_sample_freq=4),
    "LunarLander-v3": dict(
        n_envs=16, n_timesteps=1_000_000, n_steps=1024, batch_size=64, gae_lambda=0.98,
        gamma=0.999, n_epochs=4, ent_coef=0.01),
    "LunarLanderContinuous-v3": dict(
        n_envs=16, n_timesteps=1_000_000, n_steps=1024, batch_size=64, gae_lambda=0.98,
        gamma=0.999, n_epochs=4, ent_coef=0.01),
    "BipedalWalker-v3": dict(
        normalize=True, n_envs=32, n_timesteps=5_000_000, n_steps=2048, batch_size=64,
        gae_lambda=0.95, gamma=0.999, n_epochs=10, ent_coef=0.0, learning_rate=3e-4,
        clip_range=0.18),
    "Ant-v4": dict(normalize=True, n_timesteps=1_000_000),
    "Swimmer-v4": dict(
        normalize=True, n_timesteps=1_000_000, gamma=0.9999, n_envs=4, n_steps=1024,
        batch_size=256, learning_rate=6e-4, gae_lambda=0.98),
    "HalfCheetah-v4": dict(
        normalize=True, n_envs=1, n_timesteps=1_000_000, batch_size=64, n_steps=512,
        gamma=0.98, learning_rate=2.0633e-05, ent_coef=0.000401762, clip_range=0.1,
        n_epochs=20, gae_lambda=0.92, max_grad_norm=0.8, vf_coef=0.58096,
        policy_kwargs=dict(log_std_init=-2, ortho_init=False, activation_fn="nn.ReLU",
                           net_arch=dict(pi=[256, 256], vf=[256, 256]))),
    "Hopper-v4": dict(
        normalize=True, n_envs=1, n_timesteps=1_000_000, batch_size=32, n_steps=512,
        gamma=0.999, learning_rate=9.80828e-05, ent_coef=0.00229519, clip_range=0.2,
        n_epochs=5, gae_lambda=0.99, max_grad_norm=0.7, vf_coef=0.835671,
        policy_kwargs=dict(log_std_init=-2, ortho_init=False, activation_fn="nn.ReLU",
                           net_arch=dict(pi=[256, 256], vf=[256, 256]))),
    "Humanoid-v4": dict(
        normalize=True, n_envs=1, n_timesteps=10_000_000, batch_size=256, n_steps=512,
        gamma=0.95, learning_rate=3.56987e-05, ent_coef=0.00238306, clip_range=0.3,
        n_epochs=5, gae_lambda=0.9, max_grad_norm=2, vf_coef=0.431892,
        policy_kwargs=dict(log_std_init=-2, ortho_init=False, activation_fn="nn.ReLU",
                           net_arch=dict(pi=[256, 256], vf=[256, 256]))),
    "Walker2d-v4": dict(
        normalize=True, n_envs=1, n_timesteps=1_000_000, batch_size=32, n_steps=512,
        gamma=0.99, learning_rate=5.05041e-05, ent_coef=0.000585045, clip_range=0.1,
        n_epochs=20, gae_lambda=0.95, max_grad_norm=1, vf_coef=0.871923),
}
"""rl-baselines3-zoo's PPO entries (:data:`ZOO`) for the Gymnasium tasks of its PPO benchmark
(its ``benchmark.md``) that rollax runs through ``gymnasium:``: the classic-control and Box2D
tasks, and the MuJoCo tasks it tunes for v4 (``Ant-v4`` is its MuJoCo default: SB3's
settings with ``normalize``). Its ``policy: MlpPolicy`` is left out (the translation's
default); ``policy_kwargs`` is written as the dict its text spells. The presets
(:data:`ZOO_PRESETS`) are :func:`rollax.algos.ppo_zoo.from_zoo`'s translation of them."""


def _zoo_preset(entry: dict) -> dict:
    """The preset of one zoo entry: its :func:`from_zoo` settings. What those cannot carry
    (named in :data:`ZOO_PRESETS`' note) takes rollax's nearest part."""
    settings, _ = from_zoo(entry)
    return settings


ZOO_PRESETS: dict[str, dict] = {
    **{f"gymnasium:{name}": _zoo_preset(entry) for name, entry in ZOO_ENTRIES.items()
       if not name.endswith("-v4")},
    **{f"gymnasium:{name[:-3]}-{version}": _zoo_preset(entry)
       for name, entry in ZOO_ENTRIES.items() if name.endswith("-v4")
       for version in ("v4", "v5")},
}
"""rl-baselines3-zoo's PPO settings (:data:`ZOO_ENTRIES`) as presets of ``gymnasium:<task>``,
the MuJoCo ones for v4 and v5 alike (v5 fixes v4's bugs; the zoo tunes v4). Every argument
maps to its PPOConfig field (``n_envs`` num_envs, ``n_steps`` num_steps, ``batch_size`` the
minibatches that split a rollout into batches of that size, or one when the rollout is
smaller, ``n_epochs`` epochs, ``learning_rate`` lr and a ``lin_`` one anneal_lr,
``gamma``, ``gae_lambda``, ``ent_coef``, ``vf_coef`` doubled (rollax halves the squared
error), ``max_grad_norm``, ``normalize`` normalize_observations and normalize_rewards,
``net_arch`` hidden, ``activation_fn`` activation, ``log_std_init`` init_log_std; no value
clipping, as Stable-Baselines3 has none by default), except:

- ``clip_range: lin_0.2`` (CartPole-v1): clip_eps stays at its start value, 0.2;
- ``use_sde`` (MountainCarContinuous-v0, Pendulum-v1; and ``sde_sample_freq``): rollax has no
  generalised state-dependent exploration; its Gaussian has a state-independent log standard
  deviation, started at the entry's ``log_std_init`` (-3.29 for MountainCarContinuous, 0 for
  Pendulum) and resampled at every step;
- ``ortho_init: False`` (MountainCarContinuous-v0 and the MuJoCo entries): rollax's layers are
  always orthogonally initialised;
- ``max_grad_norm``: Stable-Baselines3 clips the norm of all gradients together, rollax the
  actor's and the critic's apart;
- ``n_timesteps`` is total_steps: rollax trains ``total_steps // (num_envs * num_steps)``
  updates where Stable-Baselines3 trains whole updates until it has the steps, one more
  when they do not divide (LunarLander-v3: 61 updates of 16,384 steps, 999,424 steps)."""

PRESETS: dict[str, dict] = {
    "CartPole-v1": {},
    "Acrobot-v1": dict(total_steps=1_000_000, num_envs=8),
    "MountainCar-v0": dict(total_steps=1_000_000, num_envs=16, normalize_observations=True),
    "Pendulum-v1": dict(
        total_steps=1_000_000, num_envs=16, num_steps=256, epochs=10, minibatches=16, lr=1e-3,
        gamma=0.95, gae_lambda=0.95, ent_coef=0.0, normalize_observations=True,
        reward_scale=0.1, max_grad_norm=0.5,
    ),
    **{f"gymnax:{game}-MinAtar": dict(MINATAR) for game in MINATAR_GAMES},
    **{f"pgx:minatar-{game}": dict(MINATAR) for game in MINATAR_GAMES.values()},
    **{f"{suite}:{task}-{version}": dict(MUJOCO) for task in MUJOCO_TASKS
       for suite in ("envpool", "gymnasium") for version in ("v4", "v5")},
    **{f"envpool:{game}-v5": dict(ATARI) for game in ATARI_GAMES},
    **ZOO_PRESETS,
    "jumanji:Minesweeper-v0": dict(GRID),
    "pgx:tic_tac_toe": dict(TIC_TAC_TOE),
}
"""Tuned settings per task (overrides of the PPOConfig defaults)."""
