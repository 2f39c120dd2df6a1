"""Single sign-on with each tenant's OpenID Connect provider: its configuration, the
Authorization Code flow with PKCE for the web app, the provider's access tokens on the API, and
the mapping of provider groups onto roles."""
