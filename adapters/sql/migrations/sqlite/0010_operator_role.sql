-- Two kinds of admin (issue 32): `operator` keys manage every tenant, the
-- tenants themselves and the workers; `admin` keys now manage only their own
-- tenant. Every key that was `admin` governed every tenant, so it becomes an
-- `operator` and keeps doing all it did. Data only: `role` is already a
-- free-text column wide enough for the new name.
UPDATE api_keys SET role = 'operator' WHERE role = 'admin';
