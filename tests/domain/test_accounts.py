"""People's passwords at production's cost: the one place the suite keeps argon2id's real parameters (every other test
hashes at the cheapest, `conftest.CHEAP_PASSWORD_HASHING`), and hashes made at one cost checked at another."""

from argon2 import PasswordHasher

from domain.accounts import Passwords
from domain.config import Config

from conftest import PASSWORDS


def test_production_hashes_at_argon2_cffis_own_cost_and_a_hash_made_at_any_cost_keeps_verifying():
    production = Config.from_env({})
    library = PasswordHasher()  # what the service hashed with before its cost was configurable: RFC 9106's second
    assert (production.password_time_cost, production.password_memory_kib, production.password_parallelism) == (
        library.time_cost,
        library.memory_cost,
        library.parallelism,
    )
    passwords = Passwords.from_config(production)
    stored = passwords.hash_of("olga-password-1")
    assert stored.startswith("$argon2id$v=19$m=65536,t=3,p=4$")
    assert passwords.verify(stored, "olga-password-1")
    # argon2 reads the parameters from the hash: a process at another cost still checks what was stored before,
    # and one at production's cost what a cheaper one stored.
    assert PASSWORDS.verify(stored, "olga-password-1")
    cheap = PASSWORDS.hash_of("olga-password-1")
    assert cheap.startswith("$argon2id$v=19$m=8,t=1,p=1$")
    assert passwords.verify(cheap, "olga-password-1") and not passwords.verify(cheap, "olga-password-2")


def test_the_cost_is_read_from_the_environment():
    given = Passwords.from_config(
        Config.from_env(
            {"SVC_PASSWORD_TIME_COST": "2", "SVC_PASSWORD_MEMORY_KIB": "64", "SVC_PASSWORD_PARALLELISM": "2"}
        )
    )
    made = given.hash_of("olga-password-1")
    assert made.startswith("$argon2id$v=19$m=64,t=2,p=2$")
    assert given.verify(made, "olga-password-1") and PASSWORDS.verify(made, "olga-password-1")
