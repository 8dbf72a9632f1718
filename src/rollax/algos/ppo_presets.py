"""PPO's tuned settings per task: a table of overrides of the :class:`rollax.algos.ppo.PPOConfig`
defaults, keyed by environment name (``AlgorithmSpec.presets``; ``rollax.ppo.preset``)."""

from __future__ import annotations

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
the same preset for each."""

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
}
"""Tuned settings per task (overrides of the PPOConfig defaults)."""
