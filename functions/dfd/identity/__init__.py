"""Who is calling: the caller from the JWT authorizer's claims, the /lfs routes' own credential checks (JWT,
personal access tokens) and the token service. Imports no submodule."""
