from flotilla_operator.config_hash import config_hash


def test_config_hash():
    assert config_hash("a=1\n") == config_hash("a=1\n")
    assert config_hash("a=1\n") != config_hash("a=2\n")
    assert len(config_hash("x")) == 16
    # Document boundaries matter: ("ab", "") differs from ("a", "b").
    assert config_hash("ab", "") != config_hash("a", "b")
